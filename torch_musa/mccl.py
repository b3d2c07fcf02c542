"""torch.musa.mccl: the collective library behind the ``mccl`` backend (as torch.cuda.nccl)."""
from __future__ import annotations

import torch

from .distributed import collective_bytes, is_available, is_mccl_available, reset_collective_bytes  # noqa: F401


def library() -> str:
    """Which library runs mccl's collectives here: "nccl" (cuda driver) or "gloo" (host driver)."""
    from .distributed import _library_name

    return _library_name()


def version() -> tuple:
    """The version of the library that runs the collectives, as torch.cuda.nccl.version().

    NCCL's (major, minor, patch) on the cuda driver. Gloo has no version number of its own: on the host
    driver this is the torch version whose Gloo runs them.
    """
    if library() == "nccl":
        return tuple(torch.cuda.nccl.version())
    return tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:3])


__all__ = ["collective_bytes", "is_available", "is_mccl_available", "library", "reset_collective_bytes", "version"]
