"""Markers, input sets and dtype lists torch_musa's op tests share; the comparators and OpTest
are re-exported here, the module path tests import them from."""
import functools
import os
import platform
import random

import pytest
import torch

from .._core import device as _device
from .common_utils import get_musa_arch
from .comparators import (  # noqa: F401
    AbsDiffComparator, BooleanComparator, Comparator, DefaultComparator, QuantizedComparator, RelDiffComparator)
from .op_test import InplaceOpChek, OpTest  # noqa: F401

try:
    import triton  # noqa: F401

    _HAS_TRITON = True
except ImportError:
    _HAS_TRITON = False

MUSA_AVAILABLE = _device.is_available()
MULTIGPU_AVAILABLE = MUSA_AVAILABLE and _device.device_count() >= 2

skip_if_musa_unavailable = pytest.mark.skipif(not MUSA_AVAILABLE, reason="No MUSA device is detected")
skip_if_not_multiple_musa_device = pytest.mark.skipif(not MULTIGPU_AVAILABLE, reason="Expect multiple MUSA devices")


def skip_on_cpu_arch(arch="aarch64", reason: str = None):
    """Skips on the given host CPU architecture(s) (``platform.machine()``)."""
    arches = [arch] if isinstance(arch, str) else list(arch)
    current = (platform.machine() or platform.processor()).lower()
    return pytest.mark.skipif(any(a.lower() == current for a in arches),
                              reason=reason or f"Limited support on {current}")


def test_on_nonzero_card_if_multiple_musa_device(musa_device: int):
    """Runs the test on card ``musa_device`` too when there are several cards, then on the
    current card."""

    def wrapper(test_func):
        @functools.wraps(test_func)
        def infunc(*args, **kwargs):
            if MULTIGPU_AVAILABLE:
                with _device.device(musa_device):
                    test_func(*args, **kwargs)
            test_func(*args, **kwargs)

        return infunc

    return wrapper


test_on_nonzero_card_if_multiple_musa_device.__test__ = False  # a decorator, not a pytest test


def get_raw_data():
    """Inputs of many layouts: views with offsets and strides, empty, transposed, high-rank,
    channels_last."""
    cl = torch.channels_last
    return [
        torch.randn(10), torch.randn(10)[2:8], torch.randn(10)[2:8:2], torch.randn(10, 10), torch.randn(10, 0),
        torch.randn(10, 10).t(), torch.randn(10, 10, 2), torch.randn(10, 10, 2).transpose(0, 1),
        torch.randn(10, 10, 2, 2), torch.randn(10, 10, 2, 2, 1), torch.randn(10, 10, 2, 2, 1, 3),
        torch.randn(10, 10, 2, 2, 1, 3, 2), torch.randn(10, 10, 2, 2, 1, 3, 2, 2),
        torch.randn(10, 4, 2, 3).to(memory_format=cl), torch.randn(10, 4, 1, 1).to(memory_format=cl),
        torch.randn(10, 6, 1, 2).to(memory_format=cl), torch.randn(10, 1, 3, 0).to(memory_format=cl),
    ]


def gen_ip_port():
    """A loopback address and port ("127.a.b.c", "port") for a distributed test's rendezvous. The
    ranks call it themselves after mp.spawn, so it must agree across them: it is drawn from the parent
    process's id (theirs in common), which differs between concurrent test runs. The port avoids the
    system range (below 10000, and 32768 up)."""
    rng = random.Random(os.getppid())
    return f"127.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}", str(rng.randrange(10000, 32768))


def get_all_support_types():
    return [torch.float32, torch.int32, torch.int64]


def get_all_support_types_withfp16():
    return [torch.float16, torch.float32, torch.int32, torch.int64]


def get_float_types():
    """float32 and float16, and bfloat16 from architecture 22 on."""
    return [torch.float32, torch.float16] + ([torch.bfloat16] if get_musa_arch() >= 22 else [])


def get_all_types():
    return [torch.bool, torch.int8, torch.uint8, torch.float32, torch.int32, torch.float64, torch.int64]


def _complex_musa_to_cpu_adjust(musa_complex: torch.Tensor) -> torch.Tensor:
    return torch.view_as_complex(torch.view_as_real(musa_complex).cpu())


def _complex_cpu_to_musa_adjust(cpu_complex: torch.Tensor, musa_device: str) -> torch.Tensor:
    return torch.view_as_complex(torch.view_as_real(cpu_complex).to(musa_device))
