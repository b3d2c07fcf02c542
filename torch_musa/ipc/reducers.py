"""musa tensors, storages and events sent to another process, as CUDA IPC sends cuda ones.

torch pickles tensors for another process through ForkingPickler's reducers (torch.multiprocessing
queues and pipes, spawn arguments, DataLoader workers). torch_musa registers reducers beside
torch's: a musa tensor travels as a runtime IPC handle to the allocation that holds its storage
(host driver: the memfd file of the device's memory; cuda driver: a CUDA IPC handle), so the
receiver gets a musa tensor over the *same memory*, no copy. The sender keeps the storage until
the receiver lets it go (backend/ipc/sent_blocks.h); ``torch.musa.ipc_collect()`` frees what
receivers released. Everything that is not a musa object goes to torch's own reducer untouched.
"""
import atexit
import os
import struct
import time
import warnings
from multiprocessing.reduction import ForkingPickler

import torch

# The sender's reference-count page: (pid, file descriptor, inode).
_COUNTER_FILE = struct.Struct("<qqq")


def _is_musa(obj) -> bool:
    if isinstance(obj, torch.TypedStorage):
        obj = obj._untyped_storage  # (its .device would warn that TypedStorage is deprecated)
    device = getattr(obj, "device", None)
    return isinstance(device, torch.device) and device.type == "musa"


def _ipc():
    from .. import _C
    return _C._ipc


def _share_musa_(self):
    """``UntypedStorage._share_musa_()``, as ``_share_cuda_()``: (device, handle, storage_size_bytes,
    storage_offset_bytes, ref_counter_handle, ref_counter_offset, event_handle, event_sync_required)."""
    if self.device.type != "musa":
        raise RuntimeError(f"_share_musa_: only a musa storage can be shared this way, got one on {self.device}")
    whole = torch.empty(0, dtype=torch.uint8, device=self.device).set_(self)
    device, handle, offset_bytes, nbytes, counter, event_handle = _ipc()._share_storage(whole)
    # Byte strings where torch.cuda's tuple has them (handles, the counter's file, the event).
    return (device, handle, nbytes, offset_bytes, _COUNTER_FILE.pack(*counter[:3]), counter[3],
            event_handle or b"", event_handle is not None)


def _new_shared_musa(cls, device, handle, size_bytes, offset_bytes, ref_counter_handle, ref_counter_offset,
                     event_handle, event_sync_required):
    """``UntypedStorage._new_shared_musa(...)``, as ``_new_shared_cuda``: opens what ``_share_musa_`` gave."""
    from .._core.device import _lazy_init

    _lazy_init()
    return _ipc()._open_storage(device, handle, offset_bytes, size_bytes,
                                _COUNTER_FILE.unpack(ref_counter_handle) + (ref_counter_offset,),
                                event_handle if event_sync_required else None).untyped_storage()


def _release_ipc_counter_musa(cls, ref_counter_handle, ref_counter_offset, device=None):
    """``UntypedStorage._release_ipc_counter_musa``, as ``_release_ipc_counter_cuda``."""
    _ipc()._release_counter(_COUNTER_FILE.unpack(ref_counter_handle) + (ref_counter_offset,))


def _share(storage):
    from torch.multiprocessing.reductions import StorageWeakRef, shared_cache

    shared = storage._share_musa_()
    # A round trip into this same process finds the storage itself (torch's cache, as for cuda).
    shared_cache[_cache_key(shared)] = StorageWeakRef(storage)
    return shared


def _cache_key(shared):
    device, handle, size_bytes, offset_bytes = shared[:4]
    return ("musa", device, handle, offset_bytes, size_bytes)


def _open(shared) -> torch.UntypedStorage:
    from torch.multiprocessing.reductions import StorageWeakRef, shared_cache, storage_from_cache

    key = _cache_key(shared)
    storage = storage_from_cache(torch.UntypedStorage, key) if shared[1] else None
    if storage is not None:
        torch.UntypedStorage._release_ipc_counter_musa(*shared[4:6])  # this process holds it already
        return storage
    storage = torch.UntypedStorage._new_shared_musa(*shared)
    if shared[1]:
        shared_cache[key] = StorageWeakRef(storage)
    return storage


def _rebuild_musa_tensor(cls, size, stride, offset, dtype, requires_grad, shared):
    storage = _open(shared)
    t = torch._utils._rebuild_tensor(
        torch.storage.TypedStorage(wrap_storage=storage, dtype=dtype, _internal=True), offset, size, stride
    )
    if cls == torch.nn.parameter.Parameter:
        # (passed to the constructor: integer tensors refuse requires_grad set afterwards)
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    t.requires_grad = requires_grad
    return t


def _reduce_musa_tensor(tensor):
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not "
            "support crossing process boundaries. If you just want to transfer the data, call detach() on "
            "the tensor before serializing (e.g., putting it on the queue)."
        )
    if tensor.layout != torch.strided or tensor.is_nested:
        # Sparse and nested musa tensors travel as torch sends them: their strided musa parts,
        # each shared as a musa tensor (jagged nested tensors are Python subclasses and never get here).
        from torch.multiprocessing import reductions

        if tensor.is_nested:
            return reductions.reduce_nested_tensor(tensor)
        return reductions.reduce_sparse_tensor(tensor)
    if tensor.is_quantized:
        raise RuntimeError(
            "a quantized musa tensor cannot be sent to another process (nor can torch send a quantized cuda "
            "one): send q.int_repr() with q.q_scale() and q.q_zero_point(), or q.dequantize()"
        )
    torch.utils.hooks.warn_if_has_hooks(tensor)
    return (
        _rebuild_musa_tensor,
        (type(tensor), tensor.size(), tensor.stride(), tensor.storage_offset(), tensor.dtype,
         tensor.requires_grad, _share(tensor.untyped_storage())),
    )


def _rebuild_musa_storage(shared):
    return _open(shared)


def _reduce_musa_storage(storage):
    return (_rebuild_musa_storage, (_share(storage),))


def _musa_first(torch_reducer, musa_reducer):
    """A reducer that sends musa objects through `musa_reducer`, everything else through torch's."""
    def reduce(obj):
        if _is_musa(obj):
            return musa_reducer(obj)
        return torch_reducer(obj)
    reduce._musa_reducer = True
    return reduce


def _rebuild_event(device, handle):
    from ..streams import Event

    return Event.from_ipc_handle(device, handle)


def _reduce_event(event):
    return (_rebuild_event, (event.device, event.ipc_handle()))


def ipc_collect() -> None:
    """Frees musa memory this process sent to others that they have released (torch.cuda.ipc_collect)."""
    from .._core.device import is_initialized

    if is_initialized():
        _ipc()._collect()


def _wait_for_receivers() -> None:
    """At exit, with the cuda driver, memory sent to other processes would be freed with this
    process's CUDA context: wait (TORCH_MUSA_IPC_EXIT_TIMEOUT seconds, default 30) for the
    receivers to let it go. The host driver's memory lives on in the receivers' mappings."""
    from .._core.device import get_driver_name, is_initialized

    if not is_initialized() or get_driver_name() == "host":
        return
    deadline = time.monotonic() + float(os.environ.get("TORCH_MUSA_IPC_EXIT_TIMEOUT", "30"))
    remaining = _ipc()._collect()
    while remaining and time.monotonic() < deadline:
        time.sleep(0.05)
        remaining = _ipc()._collect()
    if remaining:
        warnings.warn(
            f"this process is exiting while {remaining} musa memory block(s) it sent are still held by other "
            "processes; they will read freed memory. Keep the sender alive until receivers drop the tensors."
        )


def _release_received() -> None:
    """At exit, what this process received is released to its senders (a storage still referenced
    during interpreter finalization would otherwise never be)."""
    from .._core.device import is_initialized

    if is_initialized():
        _ipc()._release_all_received()


def install() -> None:
    """Registers the musa reducers in front of torch's (which torch.multiprocessing registers first)."""
    import torch.multiprocessing.reductions  # noqa: F401  (registers torch's reducers first)

    # torch.cuda's storage-sharing methods under musa's names (added; torch's cuda ones untouched).
    torch.UntypedStorage._share_musa_ = _share_musa_
    torch.UntypedStorage._new_shared_musa = classmethod(_new_shared_musa)
    torch.UntypedStorage._release_ipc_counter_musa = classmethod(_release_ipc_counter_musa)

    table = ForkingPickler._extra_reducers
    for cls, musa_reducer in [
        (torch.Tensor, _reduce_musa_tensor),
        (torch.nn.parameter.Parameter, _reduce_musa_tensor),
        (torch.UntypedStorage, _reduce_musa_storage),
    ]:
        reducer = table.get(cls)
        if reducer is not None and not getattr(reducer, "_musa_reducer", False):
            ForkingPickler.register(cls, _musa_first(reducer, musa_reducer))
    from ..streams import Event, _InterprocessEvent

    for cls in (Event, _InterprocessEvent):  # (the pickler's table is keyed by exact type)
        ForkingPickler.register(cls, _reduce_event)
    atexit.register(_wait_for_receivers)
    atexit.register(_release_received)  # (runs first: a process both sends and receives)
