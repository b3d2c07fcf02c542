"""``torch_musa.core._utils``: device-index helpers torch_musa programs and extensions call."""
import os
from typing import Any, Union

import torch
from torch._utils import _get_device_index

from .._core import device as _device

DeviceUnion = Union[torch.device, int, str, None]


def _get_musa_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    """The musa device index of ``device`` (torch.cuda._utils._get_device_index's counterpart):
    an int as given; ``None``, ``"musa"`` or ``torch.device("musa")`` the current device; a
    ``torch.musa.device`` context its index; a cpu device -1 when ``allow_cpu``. Any other
    device type is a ValueError naming it."""
    if device is None:
        if not _device.is_available():
            raise ValueError("no musa device is available (torch.musa.is_available() is False)")
        return _device.current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, _device.device):
        return device.idx
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        allowed = ("musa", "cpu") if allow_cpu else ("musa",)
        if device.type not in allowed:
            raise ValueError(f"Expected a {' or '.join(allowed)} device, but got: {device}")
        if device.type == "musa" and device.index is None:
            return _device.current_device()
    return _get_device_index(device, optional, allow_cpu)


def _dummy_type(name: str) -> type:
    """A placeholder class named ``name`` that cannot be instantiated (for names whose
    implementation is missing in this build)."""

    def _raise(obj, *args, **kwargs):
        raise RuntimeError(f"Tried to instantiate dummy base class {name}")

    return type(name, (object,), {"__init__": _raise, "__new__": _raise})


# The architectures torch_musa's tests accept in TORCH_MUSA_ARCH (MTT S80 21, S4000 22, S5000 31).
_KNOWN_ARCHES = (21, 22, 31)


def _get_musa_arch() -> int:
    """The musa architecture as ``major * 10 + minor`` of device 0's compute capability
    (tests gate dtypes on it, e.g. bfloat16 from 22). ``TORCH_MUSA_ARCH`` overrides it, so a
    machine without a device can still pick a test matrix."""
    override = os.environ.get("TORCH_MUSA_ARCH")
    if override is not None:
        if not override.strip().isdigit() or int(override) not in _KNOWN_ARCHES:
            raise ValueError(f"TORCH_MUSA_ARCH={override!r} is not a musa architecture; set one of "
                             f"{', '.join(map(str, _KNOWN_ARCHES))} or unset it to read device 0's")
        return int(override)
    if not _device.is_available():
        raise RuntimeError("no musa device to read the architecture from (torch.musa.is_available() "
                           "is False); set TORCH_MUSA_ARCH to one of "
                           f"{', '.join(map(str, _KNOWN_ARCHES))}")
    major, minor = _device.get_device_capability(0)
    return major * 10 + minor


__all__ = ["DeviceUnion", "_get_musa_device_index", "_dummy_type", "_get_musa_arch"]
