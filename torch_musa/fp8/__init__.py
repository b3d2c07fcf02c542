"""torch_musa.fp8: FP8 training on musa.

    from torch_musa import fp8
    fp8.convert_to_float8_training(model, config=fp8.Float8LinearConfig(recipe="tensorwise"),
                                   module_filter_fn=lambda mod, fqn: fqn != "lm_head")

Every converted nn.Linear runs its forward, grad-input and grad-weight GEMMs in FP8
(torch._scaled_mm), with dynamic scales from fused casting kernels (amax + scale + cast
[+ transpose] in one op). With FSDP2, ``enable_fsdp_float8_all_gather=True`` all-gathers the
weights in float8. See docs/fp8.md.
"""

from .casting import (  # noqa: F401
    Float8Cast,
    amax_to_scale,
    reference_rowwise,
    reference_tensorwise,
    to_float8_rowwise,
    to_float8_tensorwise,
)
from ._kernels import register_cuda_kernels as _register_cuda_kernels
from .config import Float8LinearConfig  # noqa: F401
from .float8_linear import Float8Linear, convert_to_float8_training  # noqa: F401
from .fsdp import (  # noqa: F401
    Float8AllGatheredWeight,
    WeightWithFloat8AllGather,
    precompute_float8_dynamic_scale_for_fsdp,
)

_register_cuda_kernels()

__all__ = [
    "Float8AllGatheredWeight", "Float8Cast", "Float8Linear", "Float8LinearConfig", "WeightWithFloat8AllGather",
    "amax_to_scale", "convert_to_float8_training", "precompute_float8_dynamic_scale_for_fsdp", "reference_rowwise",
    "reference_tensorwise", "to_float8_rowwise", "to_float8_tensorwise",
]
