"""torch.musa.ipc: a musa tensor as a handle another process opens, without a queue in between.

``export_tensor(t)`` describes the view and the storage it lives in (the storage's
``_share_musa_()`` tuple) as a ``MUSAIPCTensorHandle``: picklable, and through ``to_dict()`` /
``from_dict()`` JSON-serializable, for programs that pass handles over their own channels (an RPC,
a file). ``open_tensor(handle)`` in the receiving process maps the same memory and returns a
``MUSAIPCTensor`` that owns the view until ``close()``. Devices are matched by UUID, so the
receiver may number them differently (``MUSA_VISIBLE_DEVICES``).
"""
from __future__ import annotations

import base64
import dataclasses
from typing import Any, Dict, Optional, Tuple

import torch

from .._core import device as _device

__all__ = ["MUSAIPCTensorHandle", "MUSAIPCTensor", "export_tensor", "open_tensor"]

# Positions of byte strings in the storage tuple: its handle, the counter's file, the event.
_BYTES_AT = (1, 4, 6)


@dataclasses.dataclass(frozen=True)
class MUSAIPCTensorHandle:
    """What a receiver needs to open an exported musa tensor."""

    shared_storage_info: Tuple[Any, ...]
    dtype: torch.dtype
    size: Tuple[int, ...]
    stride: Tuple[int, ...]
    storage_offset: int
    requires_grad: bool
    device_uuid: str

    def to_dict(self) -> Dict[str, Any]:
        """JSON-friendly: byte strings in base64, the dtype by name."""
        info = [base64.b64encode(v).decode("ascii") if i in _BYTES_AT else v
                for i, v in enumerate(self.shared_storage_info)]
        return {"shared_storage_info": info, "dtype": str(self.dtype), "size": list(self.size),
                "stride": list(self.stride), "storage_offset": self.storage_offset,
                "requires_grad": self.requires_grad, "device_uuid": self.device_uuid}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "MUSAIPCTensorHandle":
        info = tuple(base64.b64decode(v) if i in _BYTES_AT else v
                     for i, v in enumerate(data["shared_storage_info"]))
        dtype = getattr(torch, data["dtype"].split(".", 1)[-1])
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"not a torch dtype: {data['dtype']!r}")
        return cls(info, dtype, tuple(data["size"]), tuple(data["stride"]), int(data["storage_offset"]),
                   bool(data["requires_grad"]), str(data["device_uuid"]))


class MUSAIPCTensor:
    """Owns a received musa tensor until ``close()`` (or the end of a ``with`` block)."""

    def __init__(self, tensor: torch.Tensor):
        self._tensor: Optional[torch.Tensor] = tensor

    @property
    def closed(self) -> bool:
        return self._tensor is None

    @property
    def tensor(self) -> torch.Tensor:
        if self._tensor is None:
            raise RuntimeError("this MUSA IPC tensor is closed; open the handle again to use it")
        return self._tensor

    def close(self) -> None:
        """Lets the memory go (the sender may reuse it once every receiver has)."""
        self._tensor = None

    def __enter__(self) -> "MUSAIPCTensor":
        if self.closed:
            raise RuntimeError("this MUSA IPC tensor is closed; open the handle again to use it")
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _uuid(device) -> str:
    return str(_device.get_device_properties(device).uuid)


def export_tensor(tensor: torch.Tensor) -> MUSAIPCTensorHandle:
    """A handle to ``tensor`` (a view of musa memory) that another process opens with ``open_tensor``.
    The sender keeps the memory until every receiver has closed what it opened."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"export_tensor expects a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "musa":
        raise RuntimeError(f"export_tensor needs a MUSA tensor, got one on {tensor.device}; move it with .to('musa')")
    return MUSAIPCTensorHandle(tensor.untyped_storage()._share_musa_(), tensor.dtype, tuple(tensor.size()),
                               tuple(tensor.stride()), tensor.storage_offset(), tensor.requires_grad,
                               _uuid(tensor.device))


def _local_index(device_uuid: str) -> int:
    visible = {_uuid(i): i for i in range(_device.device_count())}
    if device_uuid not in visible:
        raise RuntimeError(f"the MUSA device {device_uuid} of this handle is not visible here "
                           f"(visible: {sorted(visible)}); check MUSA_VISIBLE_DEVICES")
    return visible[device_uuid]


def _open_storage(handle: MUSAIPCTensorHandle) -> torch.UntypedStorage:
    info = tuple(handle.shared_storage_info)
    if len(info) != 8:
        raise ValueError(f"a MUSA IPC storage description has 8 fields, got {len(info)}")
    return torch.UntypedStorage._new_shared_musa(_local_index(handle.device_uuid), *info[1:])


def open_tensor(handle: MUSAIPCTensorHandle) -> MUSAIPCTensor:
    """Opens a handle from ``export_tensor`` (made in another process) over the same memory."""
    storage = _open_storage(handle)
    t = torch.empty(0, dtype=handle.dtype, device=storage.device)
    t.set_(storage, handle.storage_offset, handle.size, handle.stride)
    return MUSAIPCTensor(t.requires_grad_(handle.requires_grad))
