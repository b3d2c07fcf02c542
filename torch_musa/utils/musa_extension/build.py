"""How musa kernel sources are built for the machine's driver.

* ``cuda`` target (the cuda driver): a ``.mu`` source is CUDA under musa names; it is
  compiled by nvcc through a ``.cu`` file that includes it, with the headers mapping
  musa's names to CUDA's (``torch_musa/include/musa_cuda``).
* ``host`` target (the host driver): a ``.mu`` (or ``.cu``) source is rewritten
  (``host_rewrite``) into C++ for the SIMT emulation and compiled by the host compiler,
  linked against torch_musa's runtime.

The target is the active musa driver's, or ``TORCH_MUSA_EXT_TARGET=host|cuda``.
"""

from __future__ import annotations

import os
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from . import host_rewrite

KERNEL_SUFFIXES = (".mu", ".cu")
HEADER_SUFFIXES = (".muh", ".cuh")
TARGETS = ("host", "cuda")

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE_DIR = os.path.join(PACKAGE_DIR, "include")


def target() -> str:
    """``"host"`` or ``"cuda"``: which driver kernel sources are compiled for."""
    forced = os.environ.get("TORCH_MUSA_EXT_TARGET", "").strip().lower()
    if forced:
        if forced not in TARGETS:
            raise ValueError(f"TORCH_MUSA_EXT_TARGET={forced!r} is not one of {TARGETS}")
        return forced
    from ..._core import device as _device

    return "cuda" if _device.get_driver_name() == "cuda" else "host"


def is_kernel_source(path: str) -> bool:
    return str(path).endswith(KERNEL_SUFFIXES)


def kernel_sources(sources: Iterable[str]) -> List[str]:
    return [str(s) for s in sources if is_kernel_source(s)]


def check_cuda_target() -> None:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    if torch.version.cuda is None:
        raise RuntimeError("musa kernels for the cuda driver need a CUDA build of torch; this torch "
                           f"({torch.__version__}) has no CUDA")
    if CUDA_HOME is None:
        raise RuntimeError("musa kernels for the cuda driver are compiled with nvcc, which was not found "
                           "(set CUDA_HOME)")


# nvcc options that mean nothing to the host compiler, with how many values follow them.
_NVCC_ONLY = {
    "-arch": 1, "--gpu-architecture": 1, "-code": 1, "--gpu-code": 1, "-gencode": 1, "--generate-code": 1,
    "--use_fast_math": 0, "-use_fast_math": 0, "--expt-relaxed-constexpr": 0, "--expt-extended-lambda": 0,
    "-lineinfo": 0, "--ptxas-options": 1, "-Xptxas": 1, "--maxrregcount": 1, "-maxrregcount": 1,
    "--resource-usage": 0, "-rdc": 1, "--relocatable-device-code": 1, "-G": 0, "--extended-lambda": 0,
    "--threads": 1, "-t": 1, "-x": 1, "-ccbin": 1, "--compiler-bindir": 1, "-Xcudafe": 1, "--keep": 0,
}


def host_flags_from_mcc(flags: Sequence[str]) -> List[str]:
    """The host compiler's share of nvcc/mcc-style flags (``-Xcompiler`` unwrapped)."""
    out: List[str] = []
    it = iter(flags)
    for f in it:
        key = f.split("=", 1)[0]
        if key in ("-Xcompiler", "--compiler-options"):
            val = f.split("=", 1)[1] if "=" in f else next(it, "")
            out.extend(v for v in val.split(",") if v)
        elif key in _NVCC_ONLY:
            if "=" not in f:
                for _ in range(_NVCC_ONLY.get(key, 0)):
                    next(it, None)
        elif key.startswith("--") and key not in ("--std",):
            continue  # other nvcc long options
        else:
            out.append(f)
    return out


def host_compile_flags(source_dirs: Iterable[str]) -> List[str]:
    flags = ["-DTORCH_MUSA_EXT_HOST=1", f"-I{INCLUDE_DIR}"]
    flags += [f"-I{d}" for d in dict.fromkeys(source_dirs)]
    return flags


def host_link_flags() -> List[str]:
    return [f"-L{PACKAGE_DIR}", "-lmusart", f"-Wl,-rpath,{PACKAGE_DIR}"]


def cuda_defines() -> List[str]:
    return ["-DTORCH_MUSA_EXT_CUDA=1"]


def nvcc_flags(mcc_flags: Sequence[str]) -> List[str]:
    return ["-DTORCH_MUSA_EXT_CUDA=1", "-D__MUSACC__=1", f"-I{INCLUDE_DIR}", *mcc_flags]


def has_opt_level(flags: Sequence[str]) -> bool:
    return any(re.match(r"-O[0-9sgz]?$", f) for f in flags)


def prepare_sources(sources: Sequence[str], tgt: str, gen_dir: str) -> Tuple[List[str], List[str]]:
    """Sources the underlying torch build compiles, and the folders of the kernel sources.

    host: kernel sources are rewritten into C++; cuda: ``.mu`` files get a ``.cu`` that
    includes them (``.cu`` files are compiled as they are).
    """
    out, dirs = [], []
    done: Dict[str, str] = {}
    for s in sources:
        s = str(s)
        if s.endswith(HEADER_SUFFIXES):
            continue  # kernel headers are included, not compiled
        if not is_kernel_source(s):
            out.append(s)
            continue
        path = os.path.abspath(s)
        dirs.append(os.path.dirname(path))
        if tgt == "host":
            out.append(host_rewrite.rewrite_file(path, gen_dir, ".cpp", done))
        elif s.endswith(".cu"):
            out.append(s)
        else:
            tag = re.sub(r"[^A-Za-z0-9_.]", "_", path.lstrip(os.sep))
            wrapper = os.path.join(gen_dir, tag + ".cu")
            _write_if_changed(wrapper, f'#include "{path}"\n')
            out.append(wrapper)
    return out, dirs


def _write_if_changed(path: str, content: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == content:
                return
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)


def split_compile_args(extra: Optional[object]) -> Tuple[List[str], List[str]]:
    """(cxx flags, mcc flags) from ``extra_compile_args`` (a list, or a dict keyed by compiler)."""
    if extra is None:
        return [], []
    if isinstance(extra, dict):
        cxx = list(extra.get("cxx", []))
        mcc: List[str] = []
        for key in ("mcc", "musa", "nvcc", "cuda"):
            mcc += list(extra.get(key, []))
        return cxx, mcc
    return list(extra), []
