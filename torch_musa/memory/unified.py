"""Unified memory, as torch_musa's ``PYTORCH_MUSA_ALLOC_CONF=cpu:unified`` and
``torch_musa.use_unified_cpu_allocator()``: while on, CPU tensors are allocated in host memory the
musa devices address in place (pinned and mapped: musaHostAlloc with musaHostAllocMapped; on the
host driver device memory is host memory). ``torch.load(map_location="musa")`` of a checkpoint read
in unified mode then gives musa storages over the very bytes it read: no device memory, no copy.

Statistics (``torch.musa.memory_stats()``): ``allocated_bytes.*`` stay device memory only;
``unified_host_bytes.all.{current,peak,allocated,freed}`` are the host bytes unified mode holds
(for all devices), ``unified_device_bytes.all.{current,peak}`` the part of them musa storages on
that device see in place.
"""
import contextlib
import re

import torch

from .. import _C

_CPU_KEY = re.compile(r"(^|,)\s*cpu\s*:")


def install() -> None:
    """``PYTORCH_MUSA_ALLOC_CONF=cpu:unified``: unified mode for the whole process, from import on."""
    env = _C._allocator_env_conf()  # the variable the allocator reads
    # Only a conf naming cpu is parsed here: other keys' errors keep surfacing at first allocation.
    if env is not None and _CPU_KEY.search(env[0]) and _C._unified_configured():
        _C._unified_enter()


@contextlib.contextmanager
def use_unified_cpu_allocator():
    """CPU tensors made inside the block (e.g. by ``torch.load``) live in host memory the musa
    devices address in place, and ``torch.load(map_location="musa")`` maps them to musa without a
    device copy. The CPU allocator is process-wide, so the block applies to every thread while it
    is open; blocks nest. Tensors made inside stay valid after it."""
    _C._unified_enter()
    try:
        yield
    finally:
        _C._unified_exit()


def is_unified(storage) -> bool:
    """Whether a CPU storage (or a tensor's) lives in unified memory."""
    if isinstance(storage, torch.Tensor):
        storage = storage.untyped_storage()
    if isinstance(storage, torch.TypedStorage):
        storage = storage._untyped_storage
    return storage.device.type == "cpu" and _C._unified_is(storage)


def device_view(storage, location: str):
    """A musa storage over a unified CPU storage's bytes for torch.load's ``location``
    ("musa", "musa:1"); None when ``storage`` is not unified memory (it is then copied as usual)."""
    if not isinstance(storage, torch.UntypedStorage) or storage.device.type != "cpu" or not _C._unified_is(storage):
        return None
    from .._core.device import _check_index, _index, _lazy_init

    _lazy_init()
    device = torch.device(location)
    return _C._unified_device_view(storage, _check_index(_index(device)))


def stats(device: int) -> dict:
    s = _C._unified_stats(device)
    return {
        "unified_host_bytes": {"all": {"current": s["host_current"], "peak": s["host_peak"],
                                       "allocated": s["host_allocated"], "freed": s["host_freed"]}},
        "unified_device_bytes": {"all": {"current": s["view_current"], "peak": s["view_peak"]}},
    }
