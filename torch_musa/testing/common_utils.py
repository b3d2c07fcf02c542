"""Test helpers: the musa architecture, the GPU clock rate for ``torch.musa._sleep``, RNG state
freezing, pytest markers, exact comparison, and running a test in a fresh process."""
import contextlib
import functools
import importlib.util
import os
import pickle
import subprocess
import sys
from statistics import mean

import pytest
import torch

from .. import random as _musa_random, streams
from .._core import device as _device
from ..core._utils import _get_musa_arch


def get_musa_arch() -> int:
    """``major * 10 + minor`` of device 0 (``TORCH_MUSA_ARCH`` overrides)."""
    return _get_musa_arch()


@functools.lru_cache()
def get_cycles_per_ms() -> float:
    """How many ``torch.musa._sleep`` cycles last a millisecond: the mean of 10 timed sleeps
    without the 2 fastest and 2 slowest (the first calls include start-up work)."""

    def measure() -> float:
        start, end = streams.Event(enable_timing=True), streams.Event(enable_timing=True)
        start.record()
        streams._sleep(1000000)
        end.record()
        end.synchronize()
        return 1000000 / start.elapsed_time(end)

    samples = sorted(measure() for _ in range(10))
    return mean(samples[2:-2])


@contextlib.contextmanager
def freeze_rng_state():
    """Restores the CPU and musa RNG states on exit (outside any dispatch or functorch mode,
    which would intercept the state tensors)."""
    from torch.utils._mode_utils import no_dispatch

    def states():
        with no_dispatch():
            return torch.get_rng_state(), (_musa_random.get_rng_state() if _device.is_available() else None)

    cpu_state, musa_state = states()
    try:
        yield
    finally:
        with no_dispatch():
            if musa_state is not None:
                _musa_random.set_rng_state(musa_state)
            torch.set_rng_state(cpu_state)


def cpu_and_musa():
    """pytest parameters: "cpu", and "musa" marked ``needs_musa``."""
    return ("cpu", pytest.param("musa", marks=pytest.mark.needs_musa))


def needs_musa(test_func):
    return pytest.mark.needs_musa(test_func)


def assert_close(actual, expected, **kwargs):
    """torch.testing.assert_close."""
    torch.testing.assert_close(actual, expected, **kwargs)


assert_equal = functools.partial(assert_close, rtol=0, atol=0)


def spawn_isolated_test(fn):
    """Runs the test in a fresh Python process (for tests whose process state, such as the
    allocator settings, must not leak into others). The child imports the test's file and
    calls the undecorated function with the same (picklable) arguments; a failure raises here
    with the child's stderr."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        payload = pickle.dumps((fn.__code__.co_filename, fn.__qualname__, args, kwargs))
        done = subprocess.run([sys.executable, "-m", __name__], input=payload, capture_output=True,
                              env=os.environ.copy(), cwd=os.path.dirname(os.path.abspath(fn.__code__.co_filename)))
        if done.returncode != 0:
            raise RuntimeError(f"[Error raised in subprocess]:\n{done.stderr.decode(errors='replace')}")

    return wrapper


def _run_isolated(payload: bytes) -> None:
    path, qualname, args, kwargs = pickle.loads(payload)
    spec = importlib.util.spec_from_file_location("_isolated_test_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    target = module
    for part in qualname.split("."):
        target = getattr(target, part)
    getattr(target, "__wrapped__", target)(*args, **kwargs)


if __name__ == "__main__":
    _run_isolated(sys.stdin.buffer.read())
