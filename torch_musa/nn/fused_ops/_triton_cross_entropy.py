"""2-D cross entropy's Triton kernels (cuda driver). Forward: one program per row, an online
max / sum-exp over column blocks, then the row's loss. Backward: a 2-D grid (row, column block),
each element exp(x - lse) * scale minus scale at the target."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_BLOCK = 4096


@triton.jit
def _fwd_kernel(x_ptr, t_ptr, w_ptr, loss_ptr, lse_ptr, C, ignore_index, HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * C
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for c0 in range(0, C, BLOCK):
        cols = c0 + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < C, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * tl.exp(tl.where(m == m_new, 0.0, m - m_new)) + tl.where(x == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    mx = tl.max(m, axis=0)
    lse = mx + tl.log(tl.sum(s * tl.exp(tl.where(m == float("-inf"), float("-inf"), m - mx)), axis=0))
    t = tl.load(t_ptr + row).to(tl.int64)
    ok = (t >= 0) & (t < C)
    xt = tl.load(base + t, mask=ok, other=0.0).to(tl.float32)
    loss = lse - xt
    if HAS_W:
        loss = loss * tl.load(w_ptr + t, mask=ok, other=1.0).to(tl.float32)
    loss = tl.where(ok, loss, float("nan"))  # out-of-range target: NaN, not a wild read
    loss = tl.where(t == ignore_index, 0.0, loss)
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)


@triton.jit
def _bwd_kernel(g_ptr, g_stride, x_ptr, t_ptr, w_ptr, lse_ptr, dx_ptr, C, ignore_index, HAS_W: tl.constexpr,
                BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    msk = cols < C
    t = tl.load(t_ptr + row).to(tl.int64)
    ok = (t >= 0) & (t < C) & (t != ignore_index)
    scale = tl.load(g_ptr + row * g_stride).to(tl.float32)
    if HAS_W:
        scale = scale * tl.load(w_ptr + t, mask=ok, other=0.0).to(tl.float32)
    scale = tl.where(ok, scale, 0.0)
    lse = tl.load(lse_ptr + row)
    x = tl.load(x_ptr + row * C + cols, mask=msk, other=0.0).to(tl.float32)
    d = tl.exp(x - lse) * scale - tl.where(cols == t, scale, 0.0)
    tl.store(dx_ptr + row * C + cols, d.to(dx_ptr.dtype.element_ty), mask=msk)


def ce_forward(x, t, w, ignore_index):
    x = x.contiguous()
    t = t.contiguous()
    M, C = x.shape
    loss = torch.empty(M, dtype=torch.float32, device=x.device)
    lse = torch.empty(M, dtype=torch.float32, device=x.device)
    if M:
        block = min(_BLOCK, triton.next_power_of_2(max(C, 16)))
        wc = w.contiguous() if w is not None else x
        _fwd_kernel[(M,)](x, t, wc, loss, lse, C, ignore_index, HAS_W=w is not None, BLOCK=block, num_warps=8)
    return loss, lse


def ce_backward(g, x, t, lse, w, ignore_index):
    x = x.contiguous()
    M, C = x.shape
    g = g.float().expand(M)  # a mean's or sum's gradient is one number, broadcast: read at stride 0
    dx = torch.empty_like(x)
    if M and C:
        block = min(_BLOCK, triton.next_power_of_2(max(C, 16)))
        wc = w.contiguous() if w is not None else x
        _bwd_kernel[(M, triton.cdiv(C, block))](g, g.stride(0), x, t.contiguous(), wc, lse.contiguous(), dx, C,
                                                 ignore_index, HAS_W=w is not None, BLOCK=block, num_warps=8)
    return dx
