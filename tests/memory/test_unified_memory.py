"""Unified memory (PYTORCH_MUSA_ALLOC_CONF=cpu:unified, torch_musa.use_unified_cpu_allocator()), as
torch_musa defines it: CPU tensors made in unified mode live in host memory the device addresses in
place, and torch.load(map_location="musa") of them allocates no device memory."""
import gc
import io
import os

import pytest
import torch

import torch_musa
from torch_musa.memory import unified as _unified_memory
from tests.conftest import run_python


def _settle():
    gc.collect()
    torch.musa.synchronize()


def _checkpoint():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return model, buf


def _stat(key):
    return torch.musa.memory_stats()[key]


def test_context_allocates_cpu_tensors_in_unified_memory_and_nests():
    assert not _unified_memory.is_unified(torch.empty(16))
    with torch_musa.use_unified_cpu_allocator():
        a = torch.arange(16.0)
        with torch.musa.use_unified_cpu_allocator():  # torch.musa is the same module; blocks nest
            b = torch.ones(8)
        c = torch.zeros(4)  # still inside the outer block
    d = torch.zeros(4)
    assert [_unified_memory.is_unified(t) for t in (a, b, c, d)] == [True, True, True, False]
    assert torch.equal(a, torch.arange(16.0))  # outlives the block


def test_torch_load_inside_context_makes_no_device_copy():
    model, buf = _checkpoint()
    nbytes = sum(t.untyped_storage().nbytes() for t in model.state_dict().values())
    _settle()
    base = torch.musa.memory_allocated()
    buf.seek(0)
    copied = torch.load(buf, map_location="musa")  # outside: a device copy
    assert torch.musa.memory_allocated() - base >= nbytes
    del copied
    _settle()
    views = _stat("unified_device_bytes.all.current")
    torch.musa.reset_peak_memory_stats()
    before = torch.musa.memory_allocated()
    buf.seek(0)
    with torch_musa.use_unified_cpu_allocator():
        loaded = torch.load(buf, map_location="musa")
    assert torch.musa.max_memory_allocated() == before  # no device bytes, not even transiently
    assert _stat("unified_device_bytes.all.current") - views == nbytes
    for k, v in model.state_dict().items():
        assert loaded[k].device.type == "musa" and torch.equal(loaded[k].cpu(), v), k
    # A musa model runs on the loaded weights, as the CPU model does.
    x = torch.randn(5, 64)
    fresh = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).to("musa")
    fresh.load_state_dict(loaded)
    torch.testing.assert_close(fresh(x.to("musa")).cpu(), model(x))
    w = loaded["0.weight"]
    torch.testing.assert_close((w @ x.to("musa").T).cpu(), model[0].weight @ x.T)
    del loaded, w
    _settle()
    assert _stat("unified_device_bytes.all.current") == views


def test_musa_view_shares_bytes_with_the_cpu_storage():
    with torch_musa.use_unified_cpu_allocator():
        cpu = torch.arange(8, dtype=torch.float32)
    storage = _unified_memory.device_view(cpu.untyped_storage(), "musa:0")
    view = torch.empty(0, dtype=torch.float32, device="musa").set_(storage, 0, (8,), (1,))
    assert view.data_ptr() != 0 and torch.equal(view.cpu(), cpu)
    view.mul_(2)  # a musa kernel writes; the CPU tensor sees it
    torch.musa.synchronize()
    assert torch.equal(cpu, torch.arange(8, dtype=torch.float32) * 2)
    cpu.fill_(7)  # the CPU writes; the musa tensor sees it
    assert torch.equal(view.cpu(), torch.full((8,), 7.0))
    del cpu
    gc.collect()
    assert torch.equal(view.cpu(), torch.full((8,), 7.0))  # the view keeps the memory alive


def test_peaks_reset_and_ordinary_storages_are_copied():
    with torch_musa.use_unified_cpu_allocator():
        t = torch.empty(1 << 16)
    assert _stat("unified_host_bytes.all.current") >= t.untyped_storage().nbytes()
    del t
    torch.musa.reset_peak_memory_stats()
    assert _stat("unified_host_bytes.all.peak") == _stat("unified_host_bytes.all.current")
    assert _unified_memory.device_view(torch.empty(4).untyped_storage(), "musa") is None
    with pytest.raises(RuntimeError, match="not allocated in unified mode"):
        torch_musa._C._unified_device_view(torch.empty(4).untyped_storage(), 0)


_DRIVER = {"TORCH_MUSA_DRIVER": os.environ.get("TORCH_MUSA_DRIVER", "host")}


def test_env_knob_turns_unified_mode_on_for_the_process():
    r = run_python("""
        import io, torch, torch_musa
        from torch_musa.memory import unified as _unified_memory
        buf = io.BytesIO(); torch.save({"w": torch.arange(1000.0)}, buf); buf.seek(0)
        base = torch.musa.memory_allocated()
        w = torch.load(buf, map_location="musa")["w"]
        print(_unified_memory.is_unified(torch.empty(3)), torch.musa.memory._get_allocator_settings()["cpu"],
              torch.musa.memory_allocated() - base, w.device.type, torch.equal(w.cpu(), torch.arange(1000.0)))
    """, env={**_DRIVER, "PYTORCH_MUSA_ALLOC_CONF": "cpu:unified"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "unified", "0", "musa", "True"], r.stdout


def test_unknown_cpu_value_names_the_accepted_ones():
    r = run_python("import torch_musa", env={**_DRIVER, "PYTORCH_MUSA_ALLOC_CONF": "cpu:shared"})
    assert r.returncode != 0
    assert "PYTORCH_MUSA_ALLOC_CONF='cpu:shared'" in r.stderr and "unified" in r.stderr and "native" in r.stderr, r.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_allocates_pageable_memory():
    # A DataLoader worker forked in unified mode cannot use the runtime: it falls back to pageable
    # memory, and frees what it inherited without calling the runtime.
    with torch_musa.use_unified_cpu_allocator():
        inherited = torch.arange(6.0)
        pid = os.fork()
        if pid == 0:
            ok = not _unified_memory.is_unified(torch.empty(4)) and torch.equal(inherited * 2, torch.arange(0.0, 12.0, 2))
            del inherited
            gc.collect()
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert _unified_memory.is_unified(torch.empty(4))  # the parent is still in unified mode
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
