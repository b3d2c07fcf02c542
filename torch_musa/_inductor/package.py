"""``torch_musa._inductor.package``: torch._inductor.package's ``load_package`` for musa.

``load_package(path, "musa")`` loads an AOTInductor package compiled from a musa graph with
torch's own package loader (torch._inductor.package.load_package): the package records its
model's kernel device (torch_musa/_inductor/aoti_wrapper.py), ``device`` picks the card. Besides
a ``.pt2`` file it takes the list of files ``aot_compile`` returns under
``aot_inductor.package=True``, packaged first as torch's ``package_aoti`` does.
"""
from __future__ import annotations

import os
import tempfile
from typing import Callable, List, Union

import torch
from torch._inductor.package import load_package as _torch_load_package, package_aoti

from .._export import kernel_device

__all__ = ["load_package"]


def _device_index(device: str) -> int:
    """torch's ``device_index`` for the package's kernel device (-1: the current one)."""
    target = torch.device(kernel_device(device))
    return -1 if target.index is None else target.index


def load_package(path: Union[str, os.PathLike, List[str]], device: str = "musa") -> Callable:
    """The compiled model of an AOTInductor package (``.pt2`` file, or the list of files
    ``aot_compile`` returns when packaging) for ``device`` ("musa", "musa:i" or "cpu")."""
    index = _device_index(device)
    if isinstance(path, (list, tuple)):
        with tempfile.TemporaryDirectory() as tmp:
            archive = package_aoti(os.path.join(tmp, "model.pt2"), list(path))
            return _torch_load_package(archive, device_index=index)
    if os.fspath(path).endswith(".so"):
        raise RuntimeError(f"{os.fspath(path)!r} is a compiled model library, not a package: load it with "
                           "torch_musa._export.aot_load(so_path, device)")
    return _torch_load_package(path, device_index=index)
