"""Build PyTorch extensions with MUSA kernels (``.mu``) for torch_musa; the target of
musa-converter's ``from torch.utils.cpp_extension import X`` rewrite.

A layer over :mod:`torch.utils.cpp_extension` (ninja builds):

* ``MUSAExtension`` + ``BuildExtension`` (setup.py), ``load`` and
  ``load_inline(musa_sources=...)`` accept kernel sources: ``.mu`` (``.muh`` headers),
  and ``.cu``/``.cuh`` for converted code.
* On the cuda driver kernels are compiled by nvcc and run on the GPU; on the host driver
  they are compiled by the host compiler for the SIMT emulation and run on the CPU
  (see docs/extensions.md). ``TORCH_MUSA_EXT_TARGET=host|cuda`` picks the target
  explicitly (default: the active driver's).
* Headers (``<musa_runtime.h>``, ``"torch_musa/csrc/core/MUSAStream.h"``, ...) come from
  ``include_paths()``; ``extra_compile_args={"cxx": [...], "mcc": [...]}``.
* The CUDA spellings from the converter are accepted: ``MUSA_HOME``, ``with_musa=``,
  ``musa_sources=``/``cuda_sources=``, ``extra_musa_cflags=``/``extra_cuda_cflags=``.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from torch.utils import cpp_extension as _cpp
from torch.utils.cpp_extension import CppExtension, verify_ninja_availability  # noqa: F401  (re-exported)

from . import build as _build
from .host_rewrite import MusaSourceError

__all__ = [
    "MUSA_HOME",
    "BuildExtension",
    "CppExtension",
    "MUSAExtension",
    "MusaSourceError",
    "include_paths",
    "library_paths",
    "load",
    "load_inline",
    "target",
    "verify_ninja_availability",
]


def _find_musa_home() -> str:
    """The MUSA root extension builds use (``include/musa_runtime.h``, ``lib/libmusart.so``):
    ``MUSA_HOME`` or ``MUSA_PATH`` when set (for scripts that point at a toolkit), else the
    torch_musa package, which ships those headers and the runtime itself."""
    return os.environ.get("MUSA_HOME") or os.environ.get("MUSA_PATH") or _build.PACKAGE_DIR


MUSA_HOME: Optional[str] = _find_musa_home()

target = _build.target


def include_paths(*args: Any, **kwargs: Any) -> List[str]:
    """torch's include paths plus torch_musa's extension headers."""
    return [*_cpp.include_paths(*args, **kwargs), _build.INCLUDE_DIR]


def library_paths(*args: Any, **kwargs: Any) -> List[str]:
    """torch's library paths plus torch_musa's (libmusart)."""
    return [*_cpp.library_paths(*args, **kwargs), _build.PACKAGE_DIR]


def _drop_musa_kwargs(kwargs: Dict[str, Any]) -> List[str]:
    """Removes the musa/cuda keyword spellings; returns the extra mcc flags among them."""
    for key in ("with_musa", "with_cuda"):
        kwargs.pop(key, None)
    flags: List[str] = []
    for key in ("extra_musa_cflags", "extra_cuda_cflags"):
        flags += list(kwargs.pop(key, None) or [])
    return flags


def MUSAExtension(name: str, sources: List[str], *args: Any, **kwargs: Any):
    """Like ``CUDAExtension``: C++ and kernel sources, compiled for the active driver's target
    (a ``CUDAExtension`` on the cuda driver, a ``CppExtension`` with the SIMT emulation and
    torch_musa's runtime on the host driver)."""
    kernels = _build.kernel_sources(sources)
    cxx, mcc = _build.split_compile_args(kwargs.pop("extra_compile_args", None))
    _drop_musa_kwargs(kwargs)
    include_dirs = [*kwargs.pop("include_dirs", []), _build.INCLUDE_DIR]
    # Even C++-only sources may call the runtime (<musa_runtime.h>): they build for the target too.
    tgt = _build.target()
    if tgt == "cuda":
        _build.check_cuda_target()
        ext = _cpp.CUDAExtension(name, list(sources), *args, include_dirs=include_dirs,
                                 extra_compile_args={"cxx": cxx + _build.cuda_defines(),
                                                     "nvcc": _build.nvcc_flags(mcc)}, **kwargs)
    else:
        dirs = [os.path.dirname(os.path.abspath(k)) for k in kernels]
        host = cxx + _build.host_flags_from_mcc(mcc)
        if kernels and not _build.has_opt_level(host):
            host.append("-O2")  # device code at -O0 makes the emulation several times slower
        link = [*kwargs.pop("extra_link_args", []), *_build.host_link_flags()]
        ext = CppExtension(name, list(sources), *args, include_dirs=include_dirs,
                           extra_compile_args=host + _build.host_compile_flags(dirs), extra_link_args=link, **kwargs)
    ext._musa_target = tgt  # BuildExtension prepares the kernel sources for this target
    return ext


class BuildExtension(_cpp.BuildExtension):
    """torch's BuildExtension, preparing MUSAExtension kernel sources first."""

    def build_extensions(self) -> None:
        for ext in self.extensions:
            tgt = getattr(ext, "_musa_target", None)
            if tgt is None or getattr(ext, "_musa_prepared", False):
                continue
            gen_dir = os.path.join(os.path.abspath(self.build_temp), "musa_gen", ext.name)
            ext.sources, _ = _build.prepare_sources(ext.sources, tgt, gen_dir)
            ext._musa_prepared = True
        super().build_extensions()


def _build_directory(name: str, build_directory: Optional[str], verbose: bool) -> str:
    if build_directory:
        return build_directory
    getter = getattr(_cpp, "_get_build_directory", None)
    if getter is not None:
        return getter(name, verbose)
    path = os.path.join(_cpp.get_default_build_root(), name)
    os.makedirs(path, exist_ok=True)
    return path


def load(name: str, sources: Union[str, Sequence[str]], extra_cflags: Optional[List[str]] = None,
         extra_ldflags: Optional[List[str]] = None, extra_include_paths: Optional[List[str]] = None,
         build_directory: Optional[str] = None, verbose: bool = False, **kwargs: Any):
    """``torch.utils.cpp_extension.load`` for musa: C++ and kernel sources."""
    srcs = [sources] if isinstance(sources, str) else [str(s) for s in sources]
    mcc = _drop_musa_kwargs(kwargs)
    cflags = list(extra_cflags or [])
    includes = [*(extra_include_paths or []), _build.INCLUDE_DIR]
    tgt = _build.target()
    build_dir = _build_directory(name, build_directory, verbose)
    gen_dir = os.path.join(build_dir, "musa_gen")
    prepared, dirs = _build.prepare_sources(srcs, tgt, gen_dir)
    if tgt == "cuda":
        _build.check_cuda_target()
        return _cpp.load(name, prepared, extra_cflags=cflags + _build.cuda_defines(),
                         extra_cuda_cflags=_build.nvcc_flags(mcc), extra_ldflags=extra_ldflags,
                         extra_include_paths=includes, build_directory=build_dir, verbose=verbose,
                         with_cuda=True, **kwargs)
    host = cflags + _build.host_flags_from_mcc(mcc)
    if dirs and not _build.has_opt_level(host):
        host.append("-O2")
    return _cpp.load(name, prepared, extra_cflags=host + _build.host_compile_flags(dirs),
                     extra_ldflags=[*(extra_ldflags or []), *_build.host_link_flags()],
                     extra_include_paths=includes, build_directory=build_dir, verbose=verbose,
                     with_cuda=False, **kwargs)


def _bindings(functions: Union[None, str, Iterable[str], Dict[str, str]], error_handling: bool) -> str:
    if functions is None:
        return ""
    if isinstance(functions, str):
        functions = [functions]
    docs = functions if isinstance(functions, dict) else {f: f for f in functions}
    lines = ["", "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    for fn, doc in docs.items():
        target_fn = f"torch::wrap_pybind_function({fn})" if error_handling else fn
        lines.append(f'  m.def("{fn}", {target_fn}, "{doc}");')
    lines.append("}")
    return "\n".join(lines) + "\n"


# C++ that includes musa's headers needs torch_musa's include path and runtime.
_MUSA_INCLUDE = re.compile(r'#\s*include\s*[<"](musa|torch_musa/|ATen/musa/|c10/musa/)')


def _joined(sources: Union[None, str, Sequence[str]]) -> str:
    if sources is None:
        return ""
    return sources if isinstance(sources, str) else "\n".join(sources)


def load_inline(name: str, cpp_sources: Union[str, Sequence[str]], musa_sources=None, functions=None,
                extra_cflags: Optional[List[str]] = None, extra_ldflags: Optional[List[str]] = None,
                extra_include_paths: Optional[List[str]] = None, build_directory: Optional[str] = None,
                verbose: bool = False, with_pytorch_error_handling: bool = True, **kwargs: Any):
    """``torch.utils.cpp_extension.load_inline`` for musa: ``musa_sources`` (or
    ``cuda_sources``) hold kernel code compiled for the active driver."""
    kernels = _joined(musa_sources) + _joined(kwargs.pop("cuda_sources", None))
    mcc = _drop_musa_kwargs(kwargs)
    if not kernels.strip() and not _MUSA_INCLUDE.search(_joined(cpp_sources)):
        # C++ over ATen only: torch's own load_inline, so the build (and its cache, shared with a
        # torch build of the same sources) is torch's.
        return _cpp.load_inline(name, cpp_sources, functions=functions, extra_cflags=extra_cflags,
                                extra_ldflags=extra_ldflags, extra_include_paths=extra_include_paths,
                                build_directory=build_directory, verbose=verbose,
                                with_pytorch_error_handling=with_pytorch_error_handling, with_cuda=False, **kwargs)
    build_dir = _build_directory(name, build_directory, verbose)
    cpp = "#include <torch/extension.h>\n" + _joined(cpp_sources) + _bindings(functions, with_pytorch_error_handling)
    main = os.path.join(build_dir, "main.cpp")
    _build._write_if_changed(main, cpp)
    sources = [main]
    if kernels.strip():
        mu = os.path.join(build_dir, "musa.mu")
        # torch's load_inline gives CUDA sources torch/types.h; it is a slow header (about 20 s),
        # so kernel code that names no torch::/at:: API is compiled without it.
        prelude = "#include <musa_runtime.h>\n"
        if re.search(r"\b(torch|at)::(?!musa::)", kernels):
            prelude = "#include <torch/types.h>\n" + prelude
        _build._write_if_changed(mu, prelude + kernels)
        sources.append(mu)
    return load(name, sources, extra_cflags=extra_cflags, extra_ldflags=extra_ldflags,
                extra_include_paths=extra_include_paths, build_directory=build_dir, verbose=verbose,
                extra_musa_cflags=mcc, **kwargs)
