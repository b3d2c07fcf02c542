"""torch.musa.nvtx: torch.cuda.nvtx's annotation API for musa programs.

CUDA's calls feed NVIDIA's tracer (Nsight). musa has no vendor tracer, so these feed
torch.profiler instead: a range (``range_push``/``range_pop``, ``range``) is a
``record_function`` range -- a ``user_annotation`` span on the CPU thread and a
``gpu_user_annotation`` span over the device work it launched -- and ``mark`` is a zero-length
``user_annotation`` marker. With no profiler running they cost what a ``record_function`` does.
"""
from contextlib import contextmanager
import threading

import torch

__all__ = ["range_push", "range_pop", "mark", "range"]

_local = threading.local()


def _stack() -> list:
    s = getattr(_local, "ranges", None)
    if s is None:
        s = _local.ranges = []
    return s


def range_push(msg: str) -> int:
    """Pushes a range named ``msg`` onto this thread's stack of nested ranges. Returns the
    zero-based depth of the range started (as nvtxRangePushA)."""
    s = _stack()
    s.append(torch.ops.profiler._record_function_enter_new(str(msg), None))
    return len(s) - 1


def range_pop() -> int:
    """Ends this thread's innermost range. Returns the zero-based depth of the range ended, or
    -1 if no range was open (as nvtxRangePop)."""
    s = _stack()
    if not s:
        return -1
    torch.ops.profiler._record_function_exit._RecordFunction(s.pop())
    return len(s)


def mark(msg: str) -> None:
    """An instantaneous marker named ``msg`` in the trace."""
    torch.ops.profiler._record_function_exit._RecordFunction(
        torch.ops.profiler._record_function_enter_new(str(msg), None))


@contextmanager
def range(msg: str, *args, **kwargs):  # noqa: A001  (torch.cuda.nvtx's name)
    """A context manager for a range named ``msg.format(*args, **kwargs)``."""
    range_push(msg.format(*args, **kwargs))
    try:
        yield
    finally:
        range_pop()
