"""RoPE's Triton kernels (cuda driver): the index form of rope.cpp. Forward: y[j] = u[j] c[j] +
sign(j) u[q(j)] s[j] with u[j] = x[p(j)]; backward (the transpose): dx[p(j)] = g[j] c[j] -
sign(j) g[q(j)] s[q(j)]. A program takes rows of one position (rows come in runs of `inner`
rows sharing a position in both layouts), so it computes that position's cos/sin once, in
float32 with libdevice's cosf/sinf (CUDA's, which reduce any angle's range; Triton's own cos is
an approximation that loses accuracy past a few hundred radians, which long sequences reach).
No separate cos/sin launches: the op is host-bound on the GPU, one launch per direction."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _rope_kernel(x_ptr, f_ptr, y_ptr, D, R, S, inner, f_stride,
                 INTERLEAVED: tl.constexpr, MLA: tl.constexpr, BACKWARD: tl.constexpr,
                 BLOCK_R: tl.constexpr, BLOCK_P: tl.constexpr, ROWS: tl.constexpr):
    run = tl.program_id(0).to(tl.int64)
    r = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
    rmask = r < inner
    rows = run * inner + r
    pos = run % S
    j = tl.arange(0, BLOCK_R)
    jmask = j < R
    h = R // 2
    if INTERLEAVED:
        q = j ^ 1
        sign = tl.where(j % 2 == 0, -1.0, 1.0)
    else:
        q = tl.where(j < h, j + h, j - h)
        sign = tl.where(j < h, -1.0, 1.0)
    if MLA:
        p = tl.where(j < h, 2 * j, 2 * (j - h) + 1)
        pq = tl.where(q < h, 2 * q, 2 * (q - h) + 1)
    else:
        p = j
        pq = q
    angle = tl.load(f_ptr + pos * f_stride + j, mask=jmask, other=0.0).to(tl.float32)
    c = libdevice.cos(angle)
    m2 = rmask[:, None] & jmask[None, :]
    base = rows[:, None] * D
    if BACKWARD:
        sq = libdevice.sin(tl.load(f_ptr + pos * f_stride + q, mask=jmask, other=0.0).to(tl.float32))
        g = tl.load(x_ptr + base + j[None, :], mask=m2, other=0.0).to(tl.float32)
        gq = tl.load(x_ptr + base + q[None, :], mask=m2, other=0.0).to(tl.float32)
        out = g * c[None, :] - sign[None, :] * gq * sq[None, :]
        tl.store(y_ptr + base + p[None, :], out.to(y_ptr.dtype.element_ty), mask=m2)
    else:
        s = libdevice.sin(angle)
        a = tl.load(x_ptr + base + p[None, :], mask=m2, other=0.0).to(tl.float32)
        b = tl.load(x_ptr + base + pq[None, :], mask=m2, other=0.0).to(tl.float32)
        out = a * c[None, :] + sign[None, :] * b * s[None, :]
        tl.store(y_ptr + base + j[None, :], out.to(y_ptr.dtype.element_ty), mask=m2)
    if BLOCK_P > 0:  # features past rot_dim pass through
        k = R + tl.arange(0, BLOCK_P)
        mp = rmask[:, None] & (k < D)[None, :]
        tl.store(y_ptr + base + k[None, :], tl.load(x_ptr + base + k[None, :], mask=mp), mask=mp)


def rope(x: torch.Tensor, freq: torch.Tensor, interleaved: bool, batch_first: bool, mla: bool,
         backward: bool) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    S, D, R = freq.shape[0], x.shape[3], freq.shape[-1]
    f = freq.reshape(S, R)
    if f.stride(1) != 1:
        f = f.contiguous()
    inner = x.shape[2] if batch_first else x.shape[1] * x.shape[2]  # rows sharing a position, in a run
    n_rows = x.numel() // D
    block_r = triton.next_power_of_2(R)
    block_p = triton.next_power_of_2(D - R) if D > R else 0
    rows = max(1, min(64, 4096 // max(block_r, block_p), triton.next_power_of_2(inner)))
    _rope_kernel[(n_rows // inner, triton.cdiv(inner, rows))](
        x, f, y, D, R, S, inner, f.stride(0), INTERLEAVED=interleaved, MLA=mla, BACKWARD=backward,
        BLOCK_R=block_r, BLOCK_P=block_p, ROWS=rows, num_warps=4)
    return y
