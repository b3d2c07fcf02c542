"""Float8Linear: nn.Linear whose three GEMMs (output, grad-input, grad-weight) run in FP8 through
torch._scaled_mm, with dynamic scaling by the fused casts (casting.py).

Tensorwise: x and w are cast once each in the forward, with their transposed copies (the
backward's GEMM layouts), so the backward only casts the gradient. Only float8 copies are saved
for the backward (half the bytes of a bf16 activation). Rowwise: each GEMM operand is cast with
one scale per row of the matrix _scaled_mm reads (per column of the original where a GEMM
contracts over rows). All GEMMs write bf16 (or the input's dtype where cuBLASLt allows it).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
from torch.utils.weak import WeakIdKeyDictionary

from . import casting
from .config import Float8LinearConfig

# Layers fed the same tensor (q/k/v from one norm output, gate/up from another) share its cast:
# one cast instead of three, and one saved float8 copy. Keyed by the tensor's identity; an entry
# lives as long as the tensor and is used only while the tensor is unchanged (its version).
_input_casts = WeakIdKeyDictionary()


def _cast_input(x, source, config, transpose):
    sig = (x.dtype, config.input_dtype, config.power_of_2, transpose)
    cacheable = source is not None and not torch.compiler.is_compiling()
    if cacheable:
        hit = _input_casts.get(source)
        if hit is not None and hit[0] == (source._version, sig):
            return hit[1]
    c = casting.to_float8_tensorwise(_pad_rows(x) if transpose else x, config.input_dtype, transpose=transpose,
                                     power_of_2=config.power_of_2)
    if cacheable:
        _input_casts[source] = ((source._version, sig), c)
    return c


class _Source:
    """The layer's input tensor, passed through autograd.Function.apply as a non-tensor argument
    (the cast cache key; autograd must not treat it as an input)."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


def _pad_rows(x: torch.Tensor, multiple: int = 16) -> torch.Tensor:
    # The grad-weight GEMM contracts over the rows of x and of the gradient: _scaled_mm needs
    # that dimension divisible by 16. Zero rows add nothing to the product.
    pad = (-x.shape[0]) % multiple
    return torch.nn.functional.pad(x, (0, 0, 0, pad)) if pad else x


def _mm(a, b, scale_a, scale_b, out_dtype, fast_accum=False, rowwise=False):
    # cuBLASLt's rowwise kernels write bf16 only; other dtypes are cast from it.
    dtype = torch.bfloat16 if rowwise else out_dtype
    out = torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=dtype, use_fast_accum=fast_accum)
    return out if out.dtype == out_dtype else out.to(out_dtype)


def _weight_float8(weight: torch.Tensor, config: Float8LinearConfig):
    """(w8, w8_t, inv_scale): the weight in float8, its (K, N) transposed copy, its inverse
    scale. An FSDP2 float8 all-gathered weight arrives already cast (fsdp.py)."""
    from .fsdp import Float8AllGatheredWeight

    if isinstance(weight, Float8AllGatheredWeight):
        return weight._data, weight._data.t().contiguous(), weight._scale.reciprocal()
    c = casting.to_float8_tensorwise(weight, config.weight_dtype, transpose=True, power_of_2=config.power_of_2)
    return c.data, c.data_t, c.inv_scale


class _Float8MatmulTensorwise(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, config: Float8LinearConfig, source: Optional[_Source] = None):
        out_dtype = x.dtype
        w8, w8_t, inv_sw = _weight_float8(weight, config)
        need_wgrad = weight.requires_grad
        xc = _cast_input(x, source.tensor if source else None, config, need_wgrad)
        x8 = xc.data[: x.shape[0]]
        inv_sx = xc.inv_scale
        y = _mm(x8, w8.t(), inv_sx, inv_sw, out_dtype, config.use_fast_accum)
        ctx.save_for_backward(xc.data_t if need_wgrad else None, inv_sx, w8_t, inv_sw)
        ctx.config, ctx.m, ctx.x_dtype, ctx.w_dtype = config, x.shape[0], x.dtype, weight.dtype
        return y

    @staticmethod
    def backward(ctx, grad):
        x8_t, inv_sx, w8_t, inv_sw = ctx.saved_tensors
        config = ctx.config
        need_wgrad = ctx.needs_input_grad[1]
        gc = casting.to_float8_tensorwise(_pad_rows(grad) if need_wgrad else grad, config.gradient_dtype,
                                          transpose=need_wgrad, power_of_2=config.power_of_2)
        inv_sg = gc.inv_scale
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_x = _mm(gc.data[: ctx.m], w8_t.t(), inv_sg, inv_sw, ctx.x_dtype)
        if need_wgrad:
            grad_w = _mm(gc.data_t, x8_t.t(), inv_sg, inv_sx, ctx.w_dtype)
        return grad_x, grad_w, None, None


def _rowwise(x, dtype, config):
    c = casting.to_float8_rowwise(x, dtype, power_of_2=config.power_of_2)
    return c.data, c.inv_scale


class _Float8MatmulRowwise(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, config: Float8LinearConfig):
        x8, inv_sx = _rowwise(x, config.input_dtype, config)
        w8, inv_sw = _rowwise(weight, config.weight_dtype, config)
        y = _mm(x8, w8.t(), inv_sx, inv_sw.t(), x.dtype, config.use_fast_accum, rowwise=True)
        saved_x = None
        if weight.requires_grad:  # the grad-weight GEMM reads x by columns: cast those now
            saved_x = _rowwise(_pad_rows(x).t().contiguous(), config.input_dtype, config)
        ctx.save_for_backward(*(saved_x or (None, None)), weight)
        ctx.config, ctx.m, ctx.x_dtype = config, x.shape[0], x.dtype
        return y

    @staticmethod
    def backward(ctx, grad):
        x8_t, inv_sx_t, weight = ctx.saved_tensors
        config = ctx.config
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            g8, inv_sg = _rowwise(grad.contiguous(), config.gradient_dtype, config)
            w8_t, inv_sw_t = _rowwise(weight.t().contiguous(), config.weight_dtype, config)
            grad_x = _mm(g8, w8_t.t(), inv_sg, inv_sw_t.t(), ctx.x_dtype, rowwise=True)
        if ctx.needs_input_grad[1]:
            g8_t, inv_sg_t = _rowwise(_pad_rows(grad).t().contiguous(), config.gradient_dtype, config)
            grad_w = _mm(g8_t, x8_t.t(), inv_sg_t, inv_sx_t.t(), weight.dtype, rowwise=True)
        return grad_x, grad_w, None


class Float8Linear(nn.Linear):
    """nn.Linear with FP8 GEMMs. Parameters stay in their own (high) precision, so state_dict,
    optimizers and checkpoints see an ordinary Linear."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 config: Optional[Float8LinearConfig] = None):
        if in_features % 16 or out_features % 16:
            raise ValueError(
                f"Float8Linear: in_features ({in_features}) and out_features ({out_features}) must be divisible "
                "by 16 (torch._scaled_mm's rule); keep this layer in high precision (module_filter_fn)")
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.config = config or Float8LinearConfig()

    @classmethod
    def from_float(cls, mod: nn.Linear, config: Optional[Float8LinearConfig] = None) -> "Float8Linear":
        with torch.device("meta"):
            new = cls(mod.in_features, mod.out_features, bias=False, config=config)
        new.weight = mod.weight  # the same Parameters: optimizer state and tied weights stay valid
        new.bias = mod.bias
        if new.config.enable_fsdp_float8_all_gather:
            from .fsdp import WeightWithFloat8AllGather

            new.weight = nn.Parameter(WeightWithFloat8AllGather(mod.weight.data, new.config),
                                      requires_grad=mod.weight.requires_grad)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device_type = x.device.type
        source = _Source(x)  # before autocast's cast, which makes a new tensor per layer
        if torch.is_autocast_enabled(device_type):
            x = x.to(torch.get_autocast_dtype(device_type))
        shape = x.shape
        with torch.autocast(device_type, enabled=False):
            if self.config.recipe == "tensorwise":
                y = _Float8MatmulTensorwise.apply(x.reshape(-1, shape[-1]), self.weight, self.config, source)
            else:
                y = _Float8MatmulRowwise.apply(x.reshape(-1, shape[-1]), self.weight, self.config)
        y = y.reshape(*shape[:-1], self.out_features)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, recipe={self.config.recipe}"


def convert_to_float8_training(module: nn.Module, *, config: Optional[Float8LinearConfig] = None,
                               module_filter_fn=None) -> nn.Module:
    """Swaps every nn.Linear (not subclasses) of ``module`` for a Float8Linear sharing its
    parameters, in place; returns ``module``. ``module_filter_fn(mod, fqn)`` returning False keeps
    a layer as it is; layers whose dimensions are not divisible by 16 are always kept."""
    config = config or Float8LinearConfig()

    def convertible(mod, fqn):
        return (type(mod) is nn.Linear and mod.in_features % 16 == 0 and mod.out_features % 16 == 0
                and (module_filter_fn is None or module_filter_fn(mod, fqn)))

    if convertible(module, ""):
        return Float8Linear.from_float(module, config)
    for fqn, mod in list(module.named_modules()):
        for name, child in list(mod.named_children()):
            child_fqn = f"{fqn}.{name}" if fqn else name
            if convertible(child, child_fqn):
                setattr(mod, name, Float8Linear.from_float(child, config))
    return module
