"""Autocast for flex_attention on musa.

flex_attention is a higher-order op; torch gives it autocast kernels for AutocastCUDA and
AutocastCPU only, so under ``torch.autocast("musa")`` its dispatch reached AutocastPrivateUse1
and found no kernel. Registered here through the op's own ``py_impl``, as torch registers
CUDA's: q, k and v are cast to musa's autocast dtype, then the op runs with musa's autocast key
excluded. The backward op passes through musa's autocast key, as it does through CUDA's.
"""
from __future__ import annotations

import torch
from torch._C import DispatchKey

_KEY = DispatchKey.AutocastPrivateUse1


def _cast(t, dtype):
    if isinstance(t, torch.Tensor) and t.is_floating_point() and t.device.type == "musa" and t.dtype != torch.float64:
        return t.to(dtype)
    return t


def register(module) -> None:
    hop, backward = module.flex_attention, module.flex_attention_backward
    if _KEY in hop.py_kernels:
        return

    @hop.py_impl(_KEY)
    def flex_attention_autocast_musa(query, key, value, score_mod, block_mask, scale, kernel_options,
                                     score_mod_other_buffers=(), mask_mod_other_buffers=()):
        dtype = torch.get_autocast_dtype("musa")
        query, key, value = (_cast(t, dtype) for t in (query, key, value))
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_KEY)):
            return hop(query, key, value, score_mod, block_mask, scale, kernel_options,
                       score_mod_other_buffers, mask_mod_other_buffers)

    backward.fallthrough(_KEY)
