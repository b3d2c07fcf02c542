"""2-D cross entropy's Triton kernels (cuda driver). Forward: one program per row, an online
max / sum-exp over column blocks, then the row's loss; then one program reduces the rows (sum,
mean) and the mean's denominator in a fixed order (deterministic, as CUDA's nll_loss). Backward:
a 2-D grid (row, column block), each element exp(x - lse) * scale minus scale at the target."""

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
    tl.store(loss_ptr + row, loss.to(loss_ptr.dtype.element_ty))
    tl.store(lse_ptr + row, lse)


@triton.jit
def _reduce_kernel(rows_ptr, t_ptr, w_ptr, loss_ptr, denom_ptr, M, C, ignore_index, HAS_W: tl.constexpr,
                   REDUCTION: tl.constexpr, BLOCK: tl.constexpr):
    total = tl.zeros([BLOCK], dtype=tl.float32)
    count = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, M, BLOCK):
        r = r0 + tl.arange(0, BLOCK)
        inside = r < M
        t = tl.load(t_ptr + r, mask=inside, other=0).to(tl.int64)
        valid = inside & (t != ignore_index)
        if HAS_W:
            count += tl.load(w_ptr + t, mask=valid & (t >= 0) & (t < C), other=0.0).to(tl.float32)
        else:
            count += tl.where(valid, 1.0, 0.0)
        if REDUCTION != 0:
            total += tl.load(rows_ptr + r, mask=inside, other=0.0)
    denom = tl.sum(count, axis=0)
    tl.store(denom_ptr, denom)
    if REDUCTION != 0:
        loss = tl.sum(total, axis=0)
        if REDUCTION == 1:
            loss = loss / denom
        tl.store(loss_ptr, loss.to(loss_ptr.dtype.element_ty))


@triton.jit
def _bwd_kernel(g_ptr, g_stride, denom_ptr, x_ptr, t_ptr, w_ptr, lse_ptr, dx_ptr, C, ignore_index,
                HAS_W: tl.constexpr, MEAN: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    msk = cols < C
    t = tl.load(t_ptr + row).to(tl.int64)
    ok = (t >= 0) & (t < C) & (t != ignore_index)
    scale = tl.load(g_ptr + row * g_stride).to(tl.float32)
    if MEAN:
        scale = scale / tl.load(denom_ptr)
    if HAS_W:
        scale = scale * tl.load(w_ptr + t, mask=ok, other=0.0).to(tl.float32)
    scale = tl.where(ok, scale, 0.0)
    lse = tl.load(lse_ptr + row)
    x = tl.load(x_ptr + row * C + cols, mask=msk, other=0.0).to(tl.float32)
    d = tl.exp(x - lse) * scale - tl.where(cols == t, scale, 0.0)
    tl.store(dx_ptr + row * C + cols, d.to(dx_ptr.dtype.element_ty), mask=msk)


def ce_forward(x, t, w, ignore_index, reduction, loss_dtype):
    x = x.contiguous()
    t = t.contiguous()
    M, C = x.shape
    # reduction 0 writes each row's loss in the loss dtype; 1 (mean) and 2 (sum) reduce float32 rows
    rows = torch.empty(M, dtype=loss_dtype if reduction == 0 else torch.float32, device=x.device)
    loss = rows if reduction == 0 else torch.empty((), dtype=loss_dtype, device=x.device)
    lse = torch.empty(M, dtype=torch.float32, device=x.device)
    denom = torch.empty((), dtype=torch.float32, device=x.device)
    wc = w.contiguous() if w is not None else x
    if M:
        block = min(_BLOCK, triton.next_power_of_2(max(C, 16)))
        _fwd_kernel[(M,)](x, t, wc, rows, lse, C, ignore_index, HAS_W=w is not None, BLOCK=block, num_warps=8)
    _reduce_kernel[(1,)](rows, t, wc, loss, denom, M, C, ignore_index, HAS_W=w is not None, REDUCTION=reduction,
                         BLOCK=1024, num_warps=4)
    return loss, lse, denom


def ce_backward(g, x, t, lse, denom, w, ignore_index, reduction):
    x = x.contiguous()
    M, C = x.shape
    g = g.contiguous()  # none: one gradient per row; mean, sum: one number, read at stride 0
    dx = torch.empty_like(x)
    if M and C:
        block = min(_BLOCK, triton.next_power_of_2(max(C, 16)))
        wc = w.contiguous() if w is not None else x
        _bwd_kernel[(M, triton.cdiv(C, block))](g, 1 if reduction == 0 else 0, denom, x, t.contiguous(), wc,
                                                 lse.contiguous(), dx, C, ignore_index, HAS_W=w is not None,
                                                 MEAN=reduction == 1, BLOCK=block, num_warps=8)
    return dx
