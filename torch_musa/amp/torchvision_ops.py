"""Autocast for torchvision's ops on musa. torchvision registers autocast kernels for CUDA
(AutocastCUDA) only, so under ``torch.autocast("musa")`` its ops would get half inputs next to
float boxes and fail on mixed dtypes. These do what torchvision's CUDA ones do: run the op in
float32 and return floating results in the input's dtype. Registered when torchvision loads."""
from __future__ import annotations

import torch

# torchvision's ops with CUDA autocast kernels.
_OPS = ("roi_align", "ps_roi_align", "roi_pool", "ps_roi_pool", "deform_conv2d", "nms")
_lib = None


def _float32(v):
    return v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


def _autocast_kernel(op):
    def kernel(*args):
        dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor))
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)):
            out = op(*(_float32(a) for a in args))
        if isinstance(out, torch.Tensor):
            return out.to(dtype) if out.is_floating_point() else out
        return tuple(o.to(dtype) if o.is_floating_point() else o for o in out)

    return kernel


def register(_torchvision_module=None) -> None:
    global _lib
    if _lib is not None or not hasattr(torch.ops, "torchvision"):
        return
    _lib = torch.library.Library("torchvision", "IMPL")
    for name in _OPS:
        try:
            op = getattr(torch.ops.torchvision, name).default
        except (AttributeError, RuntimeError):
            continue  # an older torchvision without it
        _lib.impl(name, _autocast_kernel(op), "AutocastPrivateUse1")
