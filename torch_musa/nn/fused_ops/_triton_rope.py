"""RoPE's Triton kernels (cuda driver): the index form of rope.cpp, several head rows per
program. Forward: y[j] = u[j] c[j] + sign(j) u[q(j)] s[j] with u[j] = x[p(j)]; backward (the
transpose): dx[p(j)] = g[j] c[j] - sign(j) g[q(j)] s[q(j)]. cos/sin come from the angles once per
call, in float32 (seq x rot_dim, small next to the input; Triton's own cos is an approximation
that loses accuracy past a few hundred radians, which long sequences reach)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, n_rows, D, R, S, inner,
                 INTERLEAVED: tl.constexpr, MLA: tl.constexpr, BACKWARD: tl.constexpr,
                 BLOCK_R: tl.constexpr, BLOCK_P: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rmask = rows < n_rows
    pos = (rows // inner) % S
    j = tl.arange(0, BLOCK_R)
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
    m2 = rmask[:, None] & (j < R)[None, :]
    base = rows[:, None] * D
    fbase = pos[:, None] * R
    if BACKWARD:
        g = tl.load(x_ptr + base + j[None, :], mask=m2, other=0.0).to(tl.float32)
        gq = tl.load(x_ptr + base + q[None, :], mask=m2, other=0.0).to(tl.float32)
        c = tl.load(cos_ptr + fbase + j[None, :], mask=m2, other=0.0)
        sq = tl.load(sin_ptr + fbase + q[None, :], mask=m2, other=0.0)
        out = g * c - sign[None, :] * gq * sq
        tl.store(y_ptr + base + p[None, :], out.to(y_ptr.dtype.element_ty), mask=m2)
    else:
        a = tl.load(x_ptr + base + p[None, :], mask=m2, other=0.0).to(tl.float32)
        b = tl.load(x_ptr + base + pq[None, :], mask=m2, other=0.0).to(tl.float32)
        c = tl.load(cos_ptr + fbase + j[None, :], mask=m2, other=0.0)
        s = tl.load(sin_ptr + fbase + j[None, :], mask=m2, other=0.0)
        out = a * c + sign[None, :] * b * s
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
    f = freq.reshape(S, R).float()  # two small launches (CUDA's cosf/sinf reduce any angle's range)
    cos, sin = f.cos(), f.sin()
    inner = x.shape[2] if batch_first else x.shape[1] * x.shape[2]
    n_rows = x.numel() // D
    block_r = triton.next_power_of_2(R)
    block_p = triton.next_power_of_2(D - R) if D > R else 0
    rows = max(1, min(64, 4096 // max(block_r, block_p)))
    _rope_kernel[(triton.cdiv(n_rows, rows),)](
        x, cos, sin, y, n_rows, D, R, S, inner, INTERLEAVED=interleaved, MLA=mla, BACKWARD=backward,
        BLOCK_R=block_r, BLOCK_P=block_p, ROWS=rows, num_warps=4)
    return y
