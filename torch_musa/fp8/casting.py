"""Fused FP8 casts: amax, scale and cast (and the transposed copy) in one op.

``to_float8_tensorwise`` / ``to_float8_rowwise`` call the ``musa_fp8`` ops: vectorized C++ on
the host driver, Triton kernels on the current musa stream on the cuda driver. The
``reference_*`` functions are the same arithmetic in eager torch ops (three to five kernels);
the fused ops equal them bit for bit.

Scales are *multipliers* (``data = x * scale``); ``torch._scaled_mm`` takes their reciprocals.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch

E4M3 = torch.float8_e4m3fn
E5M2 = torch.float8_e5m2
_FLOAT8 = (E4M3, E5M2)
_MIN_AMAX = 1e-12  # keeps the scale finite for an all-zero tensor


class Float8Cast(NamedTuple):
    data: torch.Tensor  # float8, x's shape
    data_t: Optional[torch.Tensor]  # float8 (K, M) copy of x viewed as (M, K), if asked for
    scale: torch.Tensor  # float32 multiplier, shape () (tensorwise) or (rows, 1) (rowwise)
    inv_scale: torch.Tensor  # 1 / scale: what torch._scaled_mm takes


def _check_dtype(dtype: torch.dtype) -> None:
    if dtype not in _FLOAT8:
        raise ValueError(f"float8 dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")


def to_float8_tensorwise(
    x: torch.Tensor,
    dtype: torch.dtype = E4M3,
    *,
    transpose: bool = False,
    power_of_2: bool = False,
    scale: Optional[torch.Tensor] = None,
) -> Float8Cast:
    """One scale for all of ``x``. ``transpose=True`` also returns the (K, M) float8 copy of ``x``
    viewed as (M, K) (the layout the backward's GEMMs need). A given ``scale`` (float32, one
    element) is used instead of computing one from the amax."""
    _check_dtype(dtype)
    data, data_t, s, inv = torch.ops.musa_fp8.cast_tensorwise(x, dtype, transpose, power_of_2, scale)
    return Float8Cast(data, data_t if transpose else None, s, inv)


def to_float8_rowwise(x: torch.Tensor, dtype: torch.dtype = E4M3, *, power_of_2: bool = False) -> Float8Cast:
    """One scale per row of the 2-D ``x`` (shape (rows, 1))."""
    _check_dtype(dtype)
    data, s, inv = torch.ops.musa_fp8.cast_rowwise(x, dtype, power_of_2)
    return Float8Cast(data, None, s, inv)


# ----- the unfused reference (the definition the fused kernels match bit for bit) -----

def _round_down_to_power_of_2(scale: torch.Tensor) -> torch.Tensor:
    # Clearing the mantissa bits: exact, unlike exp2(floor(log2(s))) whose libm results vary.
    rounded = (scale.view(torch.int32) & -8388608).view(torch.float32)  # 0xFF800000
    return torch.where(torch.isfinite(scale) & (scale > 0), rounded, scale)


def amax_to_scale(amax: torch.Tensor, dtype: torch.dtype, power_of_2: bool = False) -> torch.Tensor:
    """float32(fp8_max / max(float64(amax), 1e-12)), optionally rounded down to a power of two."""
    scale = (torch.finfo(dtype).max / torch.clamp(amax.double(), min=_MIN_AMAX)).float()
    return _round_down_to_power_of_2(scale) if power_of_2 else scale


def cast_with_scale(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    fmax = torch.finfo(dtype).max
    return (x.float() * scale).clamp(-fmax, fmax).to(dtype)


def reference_tensorwise(x, dtype=E4M3, *, transpose=False, power_of_2=False, scale=None) -> Float8Cast:
    if scale is None:
        scale = amax_to_scale(x.abs().amax(), dtype, power_of_2)
    data = cast_with_scale(x, scale.reshape(()), dtype)
    data_t = data.reshape(-1, x.shape[-1]).t().contiguous() if transpose else None
    scale = scale.reshape(()).float()
    return Float8Cast(data, data_t, scale, scale.reciprocal())


def reference_rowwise(x, dtype=E4M3, *, power_of_2=False) -> Float8Cast:
    scale = amax_to_scale(x.abs().amax(dim=1, keepdim=True), dtype, power_of_2)
    return Float8Cast(cast_with_scale(x, scale, dtype), None, scale, scale.reciprocal())
