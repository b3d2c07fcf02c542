"""Memory statistics and control for the musa caching allocator, like torch.cuda.memory.

Settings come from ``PYTORCH_MUSA_ALLOC_CONF`` (same format and keys as ``PYTORCH_CUDA_ALLOC_CONF``:
``expandable_segments``, ``max_split_size_mb``, ``max_non_split_rounding_mb``,
``garbage_collection_threshold``, ``roundup_power2_divisions``) and can be changed at run time with
:func:`_set_allocator_settings`.
Snapshots (:func:`_snapshot`, :func:`_dump_snapshot`) have torch.cuda's structure, so
``torch.cuda._memory_viz`` and https://pytorch.org/memory_viz render them.
"""
import collections
import contextlib
import os
import threading
import pickle
import sys
from typing import Any, Dict, Optional, Tuple

import torch

from .. import _C
from .._core.device import _check_index, _index, _lazy_init
from . import unified as _unified_memory

OutOfMemoryError = torch.OutOfMemoryError

__all__ = [
    "MemPool", "MUSAPluggableAllocator", "OutOfMemoryError", "caching_allocator_alloc", "caching_allocator_delete",
    "caching_allocator_disabled", "caching_allocator_enable", "empty_cache",
    "get_allocator_backend", "get_per_process_memory_fraction", "host_memory_stats", "host_memory_stats_as_nested_dict",
    "max_memory_allocated", "max_memory_cached",
    "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_cached", "memory_reserved",
    "memory_snapshot", "memory_stats", "memory_stats_as_nested_dict", "memory_summary",
    "reset_accumulated_host_memory_stats", "reset_accumulated_memory_stats", "reset_max_memory_allocated",
    "reset_max_memory_cached", "reset_peak_host_memory_stats",
    "reset_peak_memory_stats", "set_per_process_memory_fraction", "use_mem_pool",
]


def _device(device) -> int:
    _lazy_init()
    return _check_index(_index(device))


# torch.cuda.memory_stats() on torch versions that predate a counter does not report it.
_CUDA_DOC = torch.cuda.memory.memory_stats.__doc__ or ""
_DROP_KEYS = {k for k in ("num_oom_rejections",) if k not in _CUDA_DOC}


def memory_stats_as_nested_dict(device=None) -> Dict[str, Any]:
    """The statistics as torch.cuda.memory_stats_as_nested_dict() nests them, and where unified
    memory's bytes are (unified_host_bytes, unified_device_bytes: see torch_musa.memory.unified)."""
    index = _device(device)
    stats = _C._memory_stats_nested(index)
    for k in _DROP_KEYS:
        stats.pop(k, None)
    stats.update(_unified_memory.stats(index))
    return stats


def memory_stats(device=None) -> Dict[str, Any]:
    """Allocator statistics with the same keys as torch.cuda.memory_stats()."""
    return _flattened(memory_stats_as_nested_dict(device))


def _flattened(nested: Dict[str, Any]) -> Dict[str, Any]:
    """A nested statistics dict as torch.cuda flattens one: dotted keys, sorted."""
    result = []

    def key_str(k):
        return "_".join(str(p) for p in k) if isinstance(k, tuple) else str(k)

    def flatten(prefix, obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                flatten(f"{prefix}.{key_str(k)}" if prefix else key_str(k), v)
        else:
            result.append((prefix, obj))

    flatten("", nested)
    result.sort()
    return collections.OrderedDict(result)


def host_memory_stats_as_nested_dict() -> Dict[str, Any]:
    """The pinned (page-locked host) memory cache's statistics, nested as torch.cuda's: blocks
    and bytes it holds (``allocations``, ``allocated_bytes``), those handed out
    (``active_requests``, ``active_bytes``), and the time spent growing and shrinking it.
    (Pinning does not initialize torch.musa, so its figures are given before that too.)"""
    return _C._host_memory_stats_nested()


def host_memory_stats() -> Dict[str, Any]:
    """:func:`host_memory_stats_as_nested_dict` flattened, as torch.cuda.host_memory_stats()."""
    return _flattened(host_memory_stats_as_nested_dict())


def reset_accumulated_host_memory_stats() -> None:
    _C._reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    _C._reset_peak_host_memory_stats()


def memory_allocated(device=None) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_cached(device=None) -> int:
    """Deprecated alias of memory_reserved (as in torch.cuda)."""
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    """Deprecated alias of max_memory_reserved (as in torch.cuda)."""
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None) -> None:
    index = _device(device)
    _C._reset_peak_stats(index)
    _C._unified_reset_peak(index)


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    _C._reset_accumulated_stats(_device(device))


def empty_cache() -> None:
    """Returns cached, unused blocks to the device (expandable segments: unmaps their free pages)."""
    if _C._device_count() > 0:
        _C._empty_cache()


def caching_allocator_enable(value: bool = True) -> None:
    """Turns the musa caching allocator's cache on or off, as torch.cuda's: off, freed memory goes
    back to the device as soon as nothing else in its segment is in use (what is cached when it
    is turned off goes back too). ``PYTORCH_NO_MUSA_MEMORY_CACHING=1`` starts a process with it
    off. MemPools and graph captures keep their own pools either way."""
    _C._caching_allocator_enable(bool(value))


@contextlib.contextmanager
def caching_allocator_disabled():
    """The caching allocator's cache off inside the block, then as it was."""
    prev = _C._caching_allocator_is_enabled()
    caching_allocator_enable(False)
    try:
        yield
    finally:
        caching_allocator_enable(prev)


def mem_get_info(device=None):
    """(free, total) bytes of the device."""
    return tuple(_C._mem_get_info(_device(device)))


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    # torch.cuda's checks and messages.
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C._set_memory_fraction(fraction, _device(device))


def get_per_process_memory_fraction(device=None) -> float:
    return _C._get_memory_fraction(_device(device))


def caching_allocator_alloc(size: int, device=None, stream=None) -> int:
    """Allocates ``size`` bytes from the caching allocator; returns the address (free with caching_allocator_delete)."""
    if device is None and stream is None:
        _lazy_init()
        return _C._raw_alloc(int(size))
    dev = _device(device)
    from ..streams import stream as _stream_ctx
    from .._core.device import device as _device_ctx

    with _device_ctx(dev), (_stream_ctx(stream) if stream is not None else contextlib.nullcontext()):
        return _C._raw_alloc(int(size))


def caching_allocator_delete(mem_ptr: int) -> None:
    _C._raw_delete(int(mem_ptr))


def get_allocator_backend() -> str:
    return "native"


def _set_allocator_settings(env: str) -> None:
    """Applies PYTORCH_MUSA_ALLOC_CONF-style settings at run time (keys not named keep their value).

    ``expandable_segments`` applies to segments created afterwards; ``max_split_size_mb``,
    ``max_non_split_rounding_mb``, ``garbage_collection_threshold`` and ``roundup_power2_divisions`` to
    the next allocation.
    """
    _C._set_allocator_settings(env)


def _get_allocator_settings() -> Dict[str, Any]:
    return _C._allocator_settings()


# ---- snapshots and history ----

def memory_snapshot(mempool_id: Optional[Tuple[int, int]] = None, include_traces: bool = True):
    """The segments of every device (torch.cuda.memory_snapshot's structure)."""
    _lazy_init()
    return _C._memory_snapshot(tuple(mempool_id) if mempool_id is not None else None, include_traces)["segments"]


def _snapshot(device=None, augment_with_fx_traces: bool = False):
    """{'segments': [...], 'device_traces': [[...] per device], ...} as torch.cuda.memory._snapshot()."""
    _lazy_init()
    s = _C._memory_snapshot(None, True)
    if augment_with_fx_traces:
        s = torch.cuda.memory._augment_memory_snapshot_stack_traces(s)
    return s


def _dump_snapshot(filename: str = "dump_snapshot.pickle", augment_with_fx_traces: bool = False) -> None:
    """Pickles _snapshot() to ``filename`` (open it at https://pytorch.org/memory_viz)."""
    s = _snapshot(augment_with_fx_traces=augment_with_fx_traces)
    with open(filename, "wb") as f:
        pickle.dump(s, f)


def _record_memory_history(enabled="all", context="all", stacks: str = "all", max_entries: int = sys.maxsize,
                           device=None, clear_history: bool = False, compile_context: bool = False,
                           global_record_annotations: bool = False, skip_actions=None, **legacy) -> None:
    """Records stacks of live allocations and a history of alloc/free events (torch.cuda's arguments).

    enabled: None (off), "state" (stacks of live blocks) or "all" (also the event history);
    context: None, "state", "alloc" or "all"; stacks: "python" or "all" (adds C++ frames).
    """
    if isinstance(enabled, bool):  # the legacy signature: enabled, record_context, trace_alloc_max_entries, ...
        record_context = legacy.get("record_context", context if isinstance(context, bool) else True)
        n = legacy.get("trace_alloc_max_entries", 1)
        enabled = ("all" if n > 1 else "state") if enabled else None
        context = "all" if (enabled and record_context) else None
        stacks = "all" if legacy.get("record_context_cpp", False) else "python"
        max_entries = n
    _lazy_init()
    _C._record_memory_history(enabled, context, stacks, int(min(max_entries, 2**62)), bool(clear_history))


def _save_segment_usage(filename: str = "output.svg", snapshot=None) -> None:
    from torch.cuda import _memory_viz

    with open(filename, "w") as f:
        f.write(_memory_viz.segments(snapshot if snapshot is not None else _snapshot()))


def _save_memory_usage(filename: str = "output.svg", snapshot=None) -> None:
    from torch.cuda import _memory_viz

    with open(filename, "w") as f:
        f.write(_memory_viz.memory(snapshot if snapshot is not None else _snapshot()))


# ---- private pools ----

class MUSAPluggableAllocator:
    """Allocation functions from a shared library, for a MemPool's segments
    (torch.cuda.memory.CUDAPluggableAllocator's counterpart)::

        void* alloc(ssize_t size, int device, void* stream);
        void free(void* ptr, ssize_t size, int device, void* stream);

    ``stream`` is the raw handle ``Stream.musa_stream`` gives. The memory must be musa memory of
    ``device`` as the driver sees it: ``musaMalloc`` works on both drivers (it is CUDA device memory
    on the cuda driver, host memory on the host driver).
    """

    def __init__(self, path_to_so_file: str, alloc_fn_name: str, free_fn_name: str):
        self._allocator = _C._load_pluggable_allocator(os.fspath(path_to_so_file), alloc_fn_name, free_fn_name)

    def allocator(self):
        return self._allocator

    def __repr__(self):
        return f"<torch.musa.memory.MUSAPluggableAllocator {self._allocator.description}>"


class MemPool:
    """A private pool of the musa caching allocator (torch.cuda.MemPool's interface).

    Allocations made inside ``use_mem_pool(pool)`` come from, and return to, this pool's segments
    only. With ``allocator`` (a MUSAPluggableAllocator, or its ``.allocator()``) the pool's segments
    come from that allocator's functions and go back to them when the cache is emptied.
    """

    def __init__(self, allocator=None, use_on_oom: bool = False, no_split: bool = False):
        if isinstance(allocator, MUSAPluggableAllocator):
            allocator = allocator.allocator()
        if allocator is not None and not isinstance(allocator, _C._MUSAPluggableAllocator):
            raise TypeError(f"MemPool(allocator=...) takes a torch.musa.memory.MUSAPluggableAllocator, got "
                            f"{type(allocator).__name__}; a torch.cuda allocator cannot serve musa memory")
        self._device = _device(None)
        self._allocator = allocator
        self._id = tuple(_C._mempool_create(self._device, allocator))

    @property
    def id(self) -> Tuple[int, int]:
        return self._id

    @property
    def device(self) -> int:
        return self._device

    @property
    def allocator(self):
        """The pool's custom allocator (MUSAPluggableAllocator.allocator()), or None for the musa
        caching allocator's own memory (as torch.cuda.MemPool().allocator for a pool made without one)."""
        return self._allocator

    def use_count(self) -> int:
        return _C._mempool_use_count(self._device, self._id)

    def snapshot(self, include_traces: bool = True):
        return memory_snapshot(self._id, include_traces=include_traces)

    def __del__(self):
        try:
            _C._mempool_release(self._device, self._id)
        except Exception:  # interpreter shutdown
            pass


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device=None):
    """Routes this thread's allocations on ``device`` (default: the pool's) to ``pool``."""
    dev = pool.device if device is None else _device(device)
    if dev != pool.device:
        raise ValueError(f"MemPool {pool.id} belongs to musa:{pool.device}, not musa:{dev}: use it with "
                         f"device=musa:{pool.device}, or make a MemPool under torch.musa.device({dev})")
    _C._mempool_begin(dev, pool.id)
    try:
        yield
    finally:
        _C._mempool_end(dev, pool.id)
        _C._mempool_release(dev, pool.id)


_active_pools = threading.local()


class MemPoolContext:
    """The per-thread active MemPool, as torch_musa and older torch.cuda releases have it: making
    one makes ``pool`` this thread's active pool and routes the thread's allocations to it
    (use_mem_pool's routing) until it is deleted or its ``with`` block ends; then the previous one
    is active again. ``MemPoolContext.active_pool()`` is the innermost one active on this thread."""

    def __init__(self, pool: MemPool):
        if not isinstance(pool, MemPool):
            raise TypeError(f"MemPoolContext needs a torch.musa.MemPool, got {type(pool).__name__}")
        self._pool = pool
        self._ctx = use_mem_pool(pool)
        self._ctx.__enter__()
        if not hasattr(_active_pools, "stack"):
            _active_pools.stack = []
        self._stack = _active_pools.stack  # this thread's, even if another thread deletes it
        self._stack.append(pool)

    @staticmethod
    def active_pool() -> Optional[MemPool]:
        stack = getattr(_active_pools, "stack", None)
        return stack[-1] if stack else None

    def _leave(self) -> None:
        ctx, self._ctx = self._ctx, None
        if ctx is None:
            return
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i] is self._pool:
                del self._stack[i]
                break
        ctx.__exit__(None, None, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._leave()
        return False

    def __del__(self):
        try:
            self._leave()
        except Exception:  # interpreter shutdown
            pass


# ---- summary ----

def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator statistics (torch.cuda.memory_summary's layout)."""
    device = _device(device)
    stats = memory_stats(device)

    def scaled(value, pref, prefixes, base, limit):
        # value in the unit that keeps `pref` (the row's peak) under `limit`
        prefix = prefixes[0]
        for p in prefixes[1:]:
            if pref < limit:
                break
            prefix, value, pref = p, value // base, pref / base
        return value, prefix

    def fmt_size(sz, pref):
        sz, prefix = scaled(sz, pref, ["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"], 1024, 768 * 1024)
        return f"{sz:6d} {prefix}"

    def fmt_count(cnt, pref):
        cnt, prefix = scaled(cnt, pref, [" ", "K", "M"], 1000, 750 * 1000)
        return f"{cnt:7d} {prefix} "

    metrics = [
        ("allocated_bytes", "Allocated memory", fmt_size), ("active_bytes", "Active memory", fmt_size),
        ("requested_bytes", "Requested memory", fmt_size), ("reserved_bytes", "MUSA reserved memory", fmt_size),
        ("inactive_split_bytes", "Non-releasable memory", fmt_size), ("allocation", "Allocations", fmt_count),
        ("active", "Active allocs", fmt_count), ("segment", "MUSA reserved segments", fmt_count),
        ("inactive_split", "Non-releasable allocs", fmt_count),
    ]
    lines = ["=" * 75, f" {'':16} PyTorch MUSA memory summary, device ID {device:<17d} ", "-" * 75,
             f"  {'':9} MUSA OOMs: {stats['num_ooms']:<12d} | {'':6} musaMalloc retries: {stats['num_alloc_retries']:<8d}  ",
             "=" * 75, "        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  "]
    for key, name, f in metrics:
        lines.append("-" * 75)
        subs = [("all", name)] + ([] if abbreviated else [("large_pool", "      from large pool"),
                                                          ("small_pool", "      from small pool")])
        pref = None
        for sub, subname in subs:
            vals = [stats[f"{key}.{sub}.{m}"] for m in ("current", "peak", "allocated", "freed")]
            pref = pref or vals
            lines.append(f" {subname:<21} | " + " | ".join(f(v, p) for v, p in zip(vals, pref)) + " ")
    for key, name in (("oversize_allocations", "Oversize allocations"), ("oversize_segments", "Oversize MUSA segments")):
        lines.append("-" * 75)
        vals = [stats[f"{key}.{m}"] for m in ("current", "peak", "allocated", "freed")]
        lines.append(f" {name:<21} | " + " | ".join(fmt_count(v, v) for v in vals) + " ")
    lines.append("=" * 75)
    return "|" + "|\n|".join(lines) + "|\n"
