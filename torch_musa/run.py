"""Run an unmodified CUDA PyTorch script on musa.

    python -m torch_musa.run script.py [args ...]
    python -m torch_musa.run -m package.module [args ...]
    python -m torch_musa.run -m torch.distributed.run --nproc_per_node 2 train.py [args ...]

The script runs as ``__main__`` with :func:`torch_musa.cuda_compat.enable_cuda_compat`
active.  Child Python processes (torchrun workers, ``multiprocessing`` spawn
children, ``subprocess`` calls of ``python``) enable it too: the runner puts a
small generated ``sitecustomize`` on ``PYTHONPATH`` and sets
``TORCH_MUSA_CUDA_COMPAT=1``.
"""

from __future__ import annotations

import atexit
import os
import runpy
import shutil
import sys
import tempfile
from typing import List, Optional, Sequence

ENV_FLAG = "TORCH_MUSA_CUDA_COMPAT"

USAGE = """usage: python -m torch_musa.run [-h] (script.py | -m module) [args ...]

Run an unmodified CUDA PyTorch program on the musa device: torch.cuda.*, "cuda"
devices, .cuda(), torch.backends.cuda/cudnn flags and the nccl backend are served
by musa. Arguments after the script (or module) are passed to it unchanged."""

# Written into a temp dir that is prepended to PYTHONPATH for child processes.
# It enables the compat layer when ENV_FLAG is set, then runs any other
# sitecustomize that this one shadows.
_SITECUSTOMIZE = '''\
import os as _os, sys as _sys
if _os.environ.get("{flag}") == "1":
    try:
        from torch_musa.utils.cuda_compat import enable_cuda_compat as _enable
        _enable()
    except Exception as _e:  # never break interpreter start-up
        _sys.stderr.write("torch_musa.run: cuda compat not enabled in child process: %r\\n" % (_e,))
_here = _os.path.dirname(_os.path.abspath(__file__))
_rest = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
import importlib.machinery as _m, importlib.util as _u
_spec = _m.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.origin and _os.path.abspath(_spec.origin) != _os.path.abspath(__file__):
    _mod = _u.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
'''


def _install_child_hook() -> str:
    """Make child Python processes enable the compat layer too; returns the temp dir."""
    d = tempfile.mkdtemp(prefix="torch_musa_run_")
    with open(os.path.join(d, "sitecustomize.py"), "w", encoding="utf-8") as f:
        f.write(_SITECUSTOMIZE.format(flag=ENV_FLAG))
    atexit.register(shutil.rmtree, d, True)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = d + (os.pathsep + old if old else "")
    os.environ[ENV_FLAG] = "1"
    return d


def _parse(argv: Sequence[str]):
    if not argv or argv[0] in ("-h", "--help"):
        return None, None, []
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit("torch_musa.run: -m needs a module name\n\n" + USAGE)
        return None, argv[1], list(argv[2:])
    if argv[0].startswith("-"):
        raise SystemExit(f"torch_musa.run: unknown option {argv[0]!r}\n\n" + USAGE)
    return argv[0], None, list(argv[1:])


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    script, module, rest = _parse(argv)
    if script is None and module is None:
        print(USAGE)
        raise SystemExit(0 if argv else 2)
    if script is not None and not os.path.isfile(script):
        raise SystemExit(f"torch_musa.run: no such script: {script}")

    from torch_musa.utils.cuda_compat import enable_cuda_compat

    _install_child_hook()
    enable_cuda_compat()
    if script is not None:
        sys.argv = [script] + rest
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")
    else:
        sys.argv = [module] + rest
        sys.path[0] = os.getcwd()
        runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
