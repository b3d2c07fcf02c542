"""Automatic mixed precision for musa: autocast and GradScaler, like torch.cuda.amp."""
import functools

import torch

from .grad_scaler import GradScaler
from .._import_hooks import after_import as _after_import
from . import flex_attention as _flex_attention

# flex_attention's autocast kernel for musa (torch registers CUDA's and CPU's); import torch loads the op
_after_import("torch._higher_order_ops.flex_attention", _flex_attention.register)


def get_amp_supported_dtype():
    """The low-precision dtypes musa autocast computes in, as torch_musa reports them."""
    return [torch.float16, torch.bfloat16]


class autocast(torch.amp.autocast_mode.autocast):
    """``torch.autocast("musa", ...)`` with torch.cuda.amp.autocast's signature."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True):
        super().__init__("musa", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    return torch.amp.custom_fwd(fwd, device_type="musa", cast_inputs=cast_inputs) if fwd else functools.partial(
        torch.amp.custom_fwd, device_type="musa", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    return torch.amp.custom_bwd(bwd, device_type="musa") if bwd else functools.partial(
        torch.amp.custom_bwd, device_type="musa")


__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "get_amp_supported_dtype"]
