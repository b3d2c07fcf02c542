"""``mcc``: the MUSA compiler front end for builds that call a compiler directly (ported
CMake or Makefile projects). It compiles ``.mu``/``.cu`` sources for the machine's
driver:

* cuda driver: nvcc, the source compiled as CUDA (``-x cu``) with torch_musa's headers
  (musa names over CUDA's);
* host driver: the source rewritten for the SIMT emulation, then the host C++ compiler
  (``$CXX``, default ``c++``); links add torch_musa's runtime.

Other inputs (``.cpp``, objects, libraries) and flags are passed on; nvcc-only flags are
dropped for the host compiler (``-Xcompiler`` values are unwrapped). The target is the
active driver's, or ``TORCH_MUSA_EXT_TARGET=host|cuda`` (which also avoids importing torch).

    mcc -O3 -c kernels.mu -o kernels.o
    mcc -shared kernels.o -o libkernels.so
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import List, Optional, Sequence

from . import build as _build
from . import host_rewrite


def _torch_dirs():
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        raise SystemExit("mcc: torch is not installed")
    root = os.path.dirname(spec.origin)
    return [os.path.join(root, "include"), os.path.join(root, "include", "torch", "csrc", "api", "include")], \
        os.path.join(root, "lib")


def _output(args: Sequence[str]) -> Optional[str]:
    for i, a in enumerate(args):
        if a == "-o" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("-o") and len(a) > 2:
            return a[2:]
    return None


def _split(args: Sequence[str]):
    """(kernel inputs, everything else) keeping the order of the rest."""
    kernels, rest = [], []
    skip_next = False
    for i, a in enumerate(args):
        if skip_next:
            rest.append(a)
            skip_next = False
            continue
        if a in ("-o", "-x", "-I", "-D", "-L", "-l", "-Xcompiler", "--compiler-options", "-arch", "-gencode", "-ccbin"):
            rest.append(a)
            skip_next = True
            continue
        if not a.startswith("-") and _build.is_kernel_source(a):
            kernels.append(a)
        else:
            rest.append(a)
    return kernels, rest


def command(args: Sequence[str], tgt: Optional[str] = None) -> List[List[str]]:
    """The compiler commands ``mcc args`` runs (kernel sources rewritten first on the host)."""
    tgt = tgt or _build.target()
    includes, torch_lib = _torch_dirs()
    inc_flags = [f"-I{_build.INCLUDE_DIR}"] + [f for d in includes for f in ("-isystem", d)]
    kernels, rest = _split(args)
    compiling = "-c" in args
    if tgt == "cuda":
        nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
        cmd = [nvcc, *_build.nvcc_flags([]), *inc_flags]
        if kernels:
            cmd += ["-x", "cu", *kernels]
        return [cmd + rest]
    cxx = os.environ.get("CXX", "c++")
    out = _output(args) or "a.out"
    gen_dir = os.path.abspath(out) + ".mcc"
    gen = [host_rewrite.rewrite_file(k, gen_dir) for k in kernels]
    dirs = [os.path.dirname(os.path.abspath(k)) for k in kernels]
    flags = _build.host_flags_from_mcc(rest)
    cmd = [cxx, "-std=c++17", "-fPIC", *([] if _build.has_opt_level(flags) else ["-O2"]),
           *_build.host_compile_flags(dirs), *inc_flags, *gen, *flags]
    if not compiling:
        cmd += [*_build.host_link_flags(), f"-L{torch_lib}", "-lc10", f"-Wl,-rpath,{torch_lib}", "-pthread"]
    return [cmd]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        cmds = command(args)
    except host_rewrite.MusaSourceError as e:
        print(f"mcc: error: {e}", file=sys.stderr)
        return 1
    for cmd in cmds:
        if os.environ.get("MCC_VERBOSE"):
            print(" ".join(cmd), file=sys.stderr)
        rc = subprocess.call(cmd)
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    sys.exit(main())
