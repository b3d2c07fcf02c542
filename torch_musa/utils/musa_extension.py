"""Build C++ extensions for torch_musa (the target of musa-converter's
``from torch.utils.cpp_extension import X`` rewrite).

This is a thin layer over :mod:`torch.utils.cpp_extension`:

* C++ sources build exactly as with ``CppExtension`` / ``load`` / ``load_inline``;
  C++ code that calls ATen ops works on musa tensors through the dispatcher.
* The CUDA spellings produced by the converter are accepted:
  ``MUSAExtension``, ``MUSA_HOME``, ``with_musa=``, ``musa_sources=``,
  ``extra_musa_cflags=``.
* MUSA kernel sources (``.mu`` / ``.cu``) need the MUSA compiler ``mcc``
  (found through ``MUSA_HOME`` or ``PATH``).  Without it a clear error is raised;
  with the host driver there is no device compiler, so write kernels in C++.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Iterable, List, Optional

from torch.utils import cpp_extension as _cpp
from torch.utils.cpp_extension import (  # noqa: F401  (re-exported)
    BuildExtension,
    CppExtension,
    include_paths,
    library_paths,
    verify_ninja_availability,
)

__all__ = [
    "MUSA_HOME",
    "BuildExtension",
    "CppExtension",
    "MUSAExtension",
    "include_paths",
    "library_paths",
    "load",
    "load_inline",
    "verify_ninja_availability",
]

_KERNEL_SUFFIXES = (".mu", ".cu", ".cuh")


def _find_musa_home() -> Optional[str]:
    home = os.environ.get("MUSA_HOME") or os.environ.get("MUSA_PATH")
    if home and os.path.isdir(home):
        return home
    mcc = shutil.which("mcc")
    if mcc:
        return os.path.dirname(os.path.dirname(os.path.realpath(mcc)))
    if os.path.isdir("/usr/local/musa"):
        return "/usr/local/musa"
    return None


MUSA_HOME: Optional[str] = _find_musa_home()


def _kernel_sources(sources: Iterable[str]) -> List[str]:
    return [s for s in sources if str(s).endswith(_KERNEL_SUFFIXES)]


def _no_device_compiler(what: str, kernels: List[str]) -> RuntimeError:
    return RuntimeError(
        f"{what}: MUSA kernel sources {kernels} need the MUSA compiler `mcc`, which was not "
        "found (set MUSA_HOME or put mcc on PATH). With the host driver there is no device "
        "compiler: implement the op in C++ (it runs on musa tensors through the dispatcher)."
    )


def _pop_musa_kwargs(kwargs: dict, what: str) -> None:
    """Drop the musa/cuda-only keyword arguments; refuse a request for device code."""
    for key in ("with_musa", "with_cuda"):
        if kwargs.pop(key, None):
            raise _no_device_compiler(what, ["<with_musa=True>"])
    for key in ("extra_musa_cflags", "extra_cuda_cflags"):
        kwargs.pop(key, None)


def MUSAExtension(name: str, sources: List[str], *args: Any, **kwargs: Any):
    """Like ``CUDAExtension``; C++-only sources build as a ``CppExtension``."""
    kernels = _kernel_sources(sources)
    if kernels:
        raise _no_device_compiler("MUSAExtension", kernels)
    extra = kwargs.get("extra_compile_args")
    if isinstance(extra, dict):
        extra = dict(extra)
        for key in ("mcc", "nvcc", "musa", "cuda"):
            extra.pop(key, None)
        kwargs["extra_compile_args"] = extra.get("cxx", [])
    return CppExtension(name, sources, *args, **kwargs)


def load(name: str, sources, *args: Any, **kwargs: Any):
    """``torch.utils.cpp_extension.load`` for musa (C++ sources)."""
    srcs = [sources] if isinstance(sources, str) else list(sources)
    kernels = _kernel_sources(srcs)
    if kernels:
        raise _no_device_compiler("load", kernels)
    _pop_musa_kwargs(kwargs, "load")
    return _cpp.load(name, srcs, *args, with_cuda=False, **kwargs)


def load_inline(name: str, cpp_sources, *args: Any, **kwargs: Any):
    """``torch.utils.cpp_extension.load_inline`` for musa (C++ sources)."""
    for key in ("musa_sources", "cuda_sources"):
        if kwargs.pop(key, None):
            raise _no_device_compiler("load_inline", [f"<{key}>"])
    _pop_musa_kwargs(kwargs, "load_inline")
    return _cpp.load_inline(name, cpp_sources, *args, with_cuda=False, **kwargs)
