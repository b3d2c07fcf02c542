"""RMSNorm's Triton kernels (cuda driver). Forward: one row per program. Backward: each program
walks a stripe of rows, writes their dx and one float32 partial sum of dw; the partials are
added by one torch sum (a few hundred rows)."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd_kernel(x_ptr, w_ptr, y_ptr, v_ptr, N, eps, HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
    iv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    y = x * iv
    if HAS_W:
        y = y * tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), mask=m)
    tl.store(v_ptr + row, iv)


@triton.jit
def _bwd_kernel(g_ptr, x_ptr, w_ptr, v_ptr, dx_ptr, dw_ptr, M, N, rows_per, HAS_W: tl.constexpr,
                BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    start = pid.to(tl.int64) * rows_per  # int64 loop index: row * N stays in range
    for row in range(start, tl.minimum(start + rows_per, M)):
        x = tl.load(x_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + row * N + cols, mask=m, other=0.0).to(tl.float32)
        iv = tl.load(v_ptr + row)
        xh = x * iv
        if HAS_W:
            dw += g * xh
            g = g * w
        mean = tl.sum(g * xh, axis=0) / N
        tl.store(dx_ptr + row * N + cols, (iv * (g - xh * mean)).to(dx_ptr.dtype.element_ty), mask=m)
    if HAS_W:
        tl.store(dw_ptr + pid * N + cols, dw, mask=m)


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _warps(block: int) -> int:
    return min(16, max(4, block // 512))


def rmsnorm_forward(x, k, n, eps, w):
    x = x.contiguous()
    y = torch.empty_like(x)
    invvar = torch.empty(x.shape[: x.dim() - k], dtype=torch.float32, device=x.device)
    rows = x.numel() // n if n else 0
    if rows and n:
        block = triton.next_power_of_2(n)
        wc = w.contiguous() if w is not None else x
        _fwd_kernel[(rows,)](x, wc, y, invvar, n, eps, HAS_W=w is not None, BLOCK=block, num_warps=_warps(block))
    return y, invvar


def rmsnorm_backward(g, invvar, x, n, w):
    x = x.contiguous()
    g = g.to(x.dtype).contiguous()
    dx = torch.empty_like(x)
    rows = x.numel() // n if n else 0
    progs = max(1, min(rows, 4 * _sm_count(x.device.index or 0)))
    rows_per = triton.cdiv(rows, progs) if rows else 0
    parts = torch.empty((progs, n), dtype=torch.float32, device=x.device) if w is not None else x
    if rows and n:
        block = triton.next_power_of_2(n)
        wc = w.contiguous() if w is not None else x
        _bwd_kernel[(progs,)](g, x, wc, invvar.contiguous(), dx, parts, rows, n, rows_per, HAS_W=w is not None,
                              BLOCK=block, num_warps=_warps(block))
    if w is None:
        return dx, x.new_empty((0,))
    dw = parts.sum(0) if rows else torch.zeros(n, dtype=torch.float32, device=x.device)
    return dx, dw.to(w.dtype).reshape(w.shape)
