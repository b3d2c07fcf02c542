"""Shared fixtures for the torch_musa foundation suites.

Every test compares musa against a reference: the same computation on CPU, or
torch.cuda's documented behaviour.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_musa  # noqa: F401  (explicit import must work too)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
    if not torch.musa.is_available():
        skip = pytest.mark.skip(reason="no musa device")
        for item in items:
            if "tools" not in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _restore_musa_state():
    """Each test starts on musa:0 with its default stream and leaves it that way."""
    if torch.musa.is_available():
        torch.musa.set_device(0)
    yield
    if torch.musa.is_available():
        torch.musa.synchronize()
        for i in range(torch.musa.device_count()):
            torch.musa.set_stream(torch.musa.default_stream(i))
        # last: set_stream makes the stream's device current, as torch.cuda.set_stream does
        # (a module fixture made before the next test's setup would land on the last device)
        torch.musa.set_device(0)


@pytest.fixture
def device():
    return torch.device("musa", 0)


@pytest.fixture
def two_devices():
    if torch.musa.device_count() < 2:
        pytest.skip("needs 2 musa devices")
    return torch.device("musa", 0), torch.device("musa", 1)


def assert_same(musa_tensor, cpu_tensor, rtol=1.3e-6, atol=1e-5, **kw):
    """musa result equals the CPU reference (device, dtype and values)."""
    assert isinstance(musa_tensor, torch.Tensor)
    assert musa_tensor.device.type == "musa", f"result is on {musa_tensor.device}, expected musa"
    torch.testing.assert_close(musa_tensor.cpu(), cpu_tensor, rtol=rtol, atol=atol, **kw)


@pytest.fixture
def same():
    return assert_same


def flash_attention_only():
    """On the cuda driver, SDPA restricted to flash attention (CUDA's chooser prefers cuDNN
    attention on Hopper; tests of the flash path ask for it). Elsewhere, no restriction."""
    import contextlib

    if torch.musa.is_available() and torch.musa.get_driver_name() == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    return contextlib.nullcontext()


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter; returns CompletedProcess (text).

    The child uses the host driver unless `env` says otherwise, so the host-driver knobs
    (TORCH_MUSA_HOST_DEVICES / _MEMORY) apply even on a machine where `auto` would pick cuda.
    """
    full_env = dict(os.environ)
    for k in ("TORCH_MUSA_HOST_DEVICES", "TORCH_MUSA_HOST_MEMORY", "MUSA_VISIBLE_DEVICES", "TORCH_MUSA_DRIVER"):
        full_env.pop(k, None)
    full_env["TORCH_MUSA_DRIVER"] = "host"
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def run_py():
    return run_python
