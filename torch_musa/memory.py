"""Memory statistics and control for the musa caching allocator, like torch.cuda.memory."""
import collections
from typing import Any, Dict

import torch

from . import _C
from ._device import _check_index, _index, _lazy_init

OutOfMemoryError = torch.OutOfMemoryError


def _device(device) -> int:
    _lazy_init()
    return _check_index(_index(device))


def memory_stats(device=None) -> Dict[str, Any]:
    """Allocator statistics with the same keys as torch.cuda.memory_stats()."""
    result = []

    def flatten(prefix, obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                flatten(f"{prefix}.{k}" if prefix else k, v)
        else:
            result.append((prefix, obj))

    flatten("", _C._memory_stats(_device(device)))
    result.sort()
    return collections.OrderedDict(result)


def memory_allocated(device=None) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def reset_peak_memory_stats(device=None) -> None:
    _C._reset_peak_stats(_device(device))


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None) -> None:
    _C._reset_accumulated_stats(_device(device))


def empty_cache() -> None:
    """Returns cached, unused blocks to the device."""
    if _C._device_count() > 0:
        _C._empty_cache()


def mem_get_info(device=None):
    """(free, total) bytes of the device."""
    return tuple(_C._mem_get_info(_device(device)))


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    if not isinstance(fraction, float):
        raise TypeError("invalid type for fraction: it must be a float between 0 and 1")
    _C._set_memory_fraction(fraction, _device(device))


def _fmt(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator statistics."""
    stats = memory_stats(device)
    rows = [("Allocated memory", "allocated_bytes", True), ("Active memory", "active_bytes", True),
            ("Requested memory", "requested_bytes", True), ("Reserved memory", "reserved_bytes", True),
            ("Non-releasable memory", "inactive_split_bytes", True), ("Allocations", "allocation", False),
            ("Active allocs", "active", False), ("Reserved segments", "segment", False)]
    lines = [f"musa memory summary, device {_device(device)}",
             f"{'Metric':<24}{'Cur Usage':>14}{'Peak Usage':>14}{'Tot Alloc':>14}{'Tot Freed':>14}"]
    for title, key, is_bytes in rows:
        f = _fmt if is_bytes else str
        vals = [stats.get(f"{key}.all.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
        lines.append(f"{title:<24}" + "".join(f"{f(v):>14}" for v in vals))
    lines.append(f"device allocs: {stats.get('num_device_alloc', 0)}, device frees: {stats.get('num_device_free', 0)}, "
                 f"alloc retries: {stats.get('num_alloc_retries', 0)}, OOMs: {stats.get('num_ooms', 0)}")
    return "\n".join(lines)
