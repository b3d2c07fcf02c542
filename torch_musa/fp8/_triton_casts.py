"""The fused casts as Triton kernels: the musa_fp8 ops' CUDA kernels, which the op layer runs
on musa memory on the current musa stream (cuda driver). Same arithmetic as the C++ kernels
(backend/fp8/fused_cast_ops.cpp), so the results are the same bits.

Two launches per tensorwise cast: a grid-wide amax (block maxima combined with an atomic max on
the float's bits: for non-negative floats integer order is float order, and NaN's bits beat
every finite value, so NaN propagates), then the cast, which reads the amax, computes the scale
in float64 as the reference does, and writes the float8 data and, optionally, its transpose.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_TL_DTYPE = {torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e5m2: tl.float8e5}
_MIN_AMAX = 1e-12


@triton.jit
def _amax_bits_kernel(x_ptr, amax_bits_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    bits = tl.abs(x).to(tl.int32, bitcast=True)
    tl.atomic_max(amax_bits_ptr, tl.max(bits, axis=0))


@triton.jit
def _scale_of(amax, fp8_max, POW2: tl.constexpr):
    s = (fp8_max.to(tl.float64) / tl.maximum(amax.to(tl.float64), 1e-12)).to(tl.float32)
    s = tl.where(amax != amax, amax, s)  # NaN amax: NaN scale (max() above would drop it)
    if POW2:
        b = s.to(tl.int32, bitcast=True) & -8388608  # keep sign and exponent
        ok = (s > 0) & (s < float("inf"))
        s = tl.where(ok, b.to(tl.float32, bitcast=True), s)
    return s


@triton.jit
def _clamp_cast(v, fp8_max, OUT: tl.constexpr):
    v = tl.where(v != v, v, tl.minimum(tl.maximum(v, -fp8_max), fp8_max))
    return v.to(OUT, fp_downcast_rounding="rtne")


@triton.jit
def _tensorwise_kernel(x_ptr, y_ptr, yt_ptr, amax_bits_ptr, given_ptr, scale_out_ptr, inv_out_ptr, M, K, fp8_max,
                       HAS_SCALE: tl.constexpr, TRANSPOSE: tl.constexpr, POW2: tl.constexpr, OUT: tl.constexpr,
                       BM: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    if HAS_SCALE:
        s = tl.load(given_ptr)
    else:
        s = _scale_of(tl.load(amax_bits_ptr).to(tl.float32, bitcast=True), fp8_max, POW2)
    rm = (pid_m * BM + tl.arange(0, BM)).to(tl.int64)
    rk = (pid_k * BK + tl.arange(0, BK)).to(tl.int64)
    mask = (rm[:, None] < M) & (rk[None, :] < K)
    x = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=mask, other=0.0).to(tl.float32)
    y = _clamp_cast(x * s, fp8_max, OUT)
    tl.store(y_ptr + rm[:, None] * K + rk[None, :], y, mask=mask)
    if TRANSPOSE:
        tl.store(yt_ptr + rk[:, None] * M + rm[None, :], tl.trans(y), mask=tl.trans(mask))
    if (pid_m == 0) & (pid_k == 0):
        tl.store(scale_out_ptr, s)
        tl.store(inv_out_ptr, tl.math.div_rn(1.0, s))


@triton.jit
def _rowwise_kernel(x_ptr, y_ptr, scale_ptr, inv_ptr, K, fp8_max, POW2: tl.constexpr, OUT: tl.constexpr,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * K
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for k0 in range(0, K, BLOCK):
        offs = k0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + offs, mask=offs < K, other=0.0).to(tl.float32)
        acc = tl.maximum(acc, tl.abs(x).to(tl.int32, bitcast=True))
    amax = tl.max(acc, axis=0).to(tl.float32, bitcast=True)
    s = _scale_of(amax, fp8_max, POW2)
    tl.store(scale_ptr + row, s)
    tl.store(inv_ptr + row, tl.math.div_rn(1.0, s))
    for k0 in range(0, K, BLOCK):
        offs = k0 + tl.arange(0, BLOCK)
        m = offs < K
        x = tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + offs, _clamp_cast(x * s, fp8_max, OUT), mask=m)


def cast_tensorwise(x, float8_dtype, transpose=False, power_of_2=False, scale=None):
    x = x.contiguous()
    K = x.shape[-1] if x.dim() else 1
    M = x.numel() // max(K, 1)
    fp8_max = torch.finfo(float8_dtype).max
    data = torch.empty(x.shape, dtype=float8_dtype, device=x.device)
    data_t = torch.empty((K, M) if transpose else (0,), dtype=float8_dtype, device=x.device)
    scale_out = torch.empty((), dtype=torch.float32, device=x.device)
    inv_out = torch.empty((), dtype=torch.float32, device=x.device)
    if x.numel() == 0:
        scale_out.fill_(fp8_max / _MIN_AMAX if scale is None else scale.item())
        return data, data_t, scale_out, scale_out.reciprocal()
    if scale is None:
        amax_bits = torch.zeros(1, dtype=torch.int32, device=x.device)
        block = 4096
        _amax_bits_kernel[(triton.cdiv(x.numel(), block),)](x, amax_bits, x.numel(), BLOCK=block, num_warps=8)
        given = scale_out  # unused
    else:
        amax_bits = scale_out  # unused
        given = scale.reshape(1).float()
    BM, BK = 64, 128
    grid = (triton.cdiv(M, BM), triton.cdiv(K, BK))
    _tensorwise_kernel[grid](x, data, data_t, amax_bits, given, scale_out, inv_out, M, K, fp8_max,
                             HAS_SCALE=scale is not None, TRANSPOSE=transpose, POW2=power_of_2,
                             OUT=_TL_DTYPE[float8_dtype], BM=BM, BK=BK, num_warps=8)
    return data, data_t, scale_out, inv_out


def cast_rowwise(x, float8_dtype, power_of_2=False):
    x = x.contiguous()
    rows, K = x.shape
    data = torch.empty(x.shape, dtype=float8_dtype, device=x.device)
    scale = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    inv = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    if x.numel():
        block = min(2048, triton.next_power_of_2(max(K, 16)))
        _rowwise_kernel[(rows,)](x, data, scale, inv, K, torch.finfo(float8_dtype).max, POW2=power_of_2,
                                 OUT=_TL_DTYPE[float8_dtype], BLOCK=block, num_warps=4)
    else:
        scale.fill_(torch.finfo(float8_dtype).max / _MIN_AMAX)
        inv = scale.reciprocal()
    return data, scale, inv
