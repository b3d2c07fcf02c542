"""SwishGLU's Triton kernels (cuda driver): rows of 2n features, a 2-D grid of (row, column block)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK = 1024


@triton.jit
def _fwd_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < n
    a = tl.load(x_ptr + row * 2 * n + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row * 2 * n + n + cols, mask=m, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(y_ptr + row * n + cols, y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _bwd_kernel(g_ptr, x_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < n
    a = tl.load(x_ptr + row * 2 * n + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row * 2 * n + n + cols, mask=m, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + row * n + cols, mask=m, other=0.0).to(tl.float32)
    sg = tl.sigmoid(a)
    da = g * b * sg * (1.0 + a * (1.0 - sg))
    db = g * a * sg
    tl.store(dx_ptr + row * 2 * n + cols, da.to(dx_ptr.dtype.element_ty), mask=m)
    tl.store(dx_ptr + row * 2 * n + n + cols, db.to(dx_ptr.dtype.element_ty), mask=m)


def _grid(x: torch.Tensor, n: int):
    return (x.numel() // (2 * n), triton.cdiv(n, _BLOCK))


def swiglu_forward(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n = x.shape[-1] // 2
    y = x.new_empty((*x.shape[:-1], n))
    if y.numel():
        _fwd_kernel[_grid(x, n)](x, y, n, BLOCK=_BLOCK, num_warps=4)
    return y


def swiglu_backward(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    g = g.to(x.dtype).contiguous()
    n = x.shape[-1] // 2
    dx = torch.empty_like(x)
    if g.numel():
        _bwd_kernel[_grid(x, n)](g, x, dx, n, BLOCK=_BLOCK, num_warps=4)
    return dx
