"""Environment knobs and import behaviour, each in a fresh interpreter (the knobs are read once per process)."""
import json

import pytest

PROBE = r'''
import json, torch
print("JSON" + json.dumps({
    "count": torch.musa.device_count(),
    "names": [torch.musa.get_device_name(i) for i in range(torch.musa.device_count())],
    "uuids": [torch.musa.get_device_properties(i).uuid for i in range(torch.musa.device_count())],
    "total": [torch.musa.get_device_properties(i).total_memory for i in range(torch.musa.device_count())],
    "driver": torch.musa.get_driver_name(),
    "last_ok": torch.ones(2, device=f"musa:{torch.musa.device_count() - 1}").sum().item() == 2.0,
}))
'''


def _probe(run_py, env):
    r = run_py(PROBE, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    line = [l for l in r.stdout.splitlines() if l.startswith("JSON")][-1]
    return json.loads(line[4:])


def test_default_two_devices(run_py):
    p = _probe(run_py, {})  # host driver (run_py's default), default device count
    assert p["count"] == 2 and p["driver"] == "host" and p["last_ok"]


def test_auto_driver(run_py):
    p = _probe(run_py, {"TORCH_MUSA_DRIVER": "auto"})
    assert p["driver"] in ("host", "cuda") and p["last_ok"]
    if p["driver"] == "host":  # no usable CUDA here: auto falls back to the host driver's defaults
        assert p["count"] == 2


def test_host_devices_3_and_visible_devices_renumber_like_cuda(run_py):
    full = _probe(run_py, {"TORCH_MUSA_HOST_DEVICES": "3"})
    assert full["count"] == 3 and full["last_ok"]
    assert len(set(full["uuids"])) == 3
    p = _probe(run_py, {"TORCH_MUSA_HOST_DEVICES": "3", "MUSA_VISIBLE_DEVICES": "1"})
    assert p["count"] == 1 and p["last_ok"]
    # the one visible device is physical device 1, now numbered 0
    assert p["uuids"] == [full["uuids"][1]]
    p = _probe(run_py, {"TORCH_MUSA_HOST_DEVICES": "3", "MUSA_VISIBLE_DEVICES": "2,0"})
    assert p["uuids"] == [full["uuids"][2], full["uuids"][0]]


def test_visible_devices_1_with_default_count(run_py):
    p = _probe(run_py, {"MUSA_VISIBLE_DEVICES": "1"})
    assert p["count"] == 1 and p["last_ok"]


def test_visible_devices_stops_at_invalid_like_cuda(run_py):
    # CUDA_VISIBLE_DEVICES: ids after the first invalid one are ignored
    p = _probe(run_py, {"TORCH_MUSA_HOST_DEVICES": "3", "MUSA_VISIBLE_DEVICES": "0,7,1"})
    assert p["count"] == 1


def test_visible_devices_empty_means_none(run_py):
    r = run_py("import torch; print('N', torch.musa.device_count(), torch.musa.is_available())",
               env={"MUSA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stderr
    assert "N 0 False" in r.stdout


def test_driver_host_explicit(run_py):
    p = _probe(run_py, {"TORCH_MUSA_DRIVER": "host"})
    assert p["driver"] == "host" and p["count"] == 2 and p["last_ok"]


def test_host_memory_capacity(run_py):
    p = _probe(run_py, {"TORCH_MUSA_HOST_MEMORY": "512MiB"})
    assert p["total"] == [512 << 20] * 2


def test_host_devices_and_memory_together(run_py):
    p = _probe(run_py, {"TORCH_MUSA_HOST_DEVICES": "3", "TORCH_MUSA_HOST_MEMORY": "1GiB"})
    assert p["count"] == 3 and p["total"] == [1 << 30] * 3


def test_import_does_no_device_work(run_py):
    code = r'''
    import torch
    import torch_musa
    assert torch.musa is torch_musa
    print("INIT", torch.musa.is_initialized())
    stats_free = torch.musa.is_available()   # availability queries don't initialise either (like cuda)
    print("AFTER_QUERY", torch.musa.is_initialized())
    torch.zeros(1, device="musa")
    print("AFTER_USE", torch.musa.is_initialized())
    '''
    r = run_py(code)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "INIT False" in r.stdout
    assert "AFTER_QUERY False" in r.stdout
    assert "AFTER_USE True" in r.stdout


def test_import_torch_autoloads_musa(run_py):
    r = run_py("import torch, sys; print('LOADED', 'torch_musa' in sys.modules, torch.device('musa:0'))")
    assert r.returncode == 0, r.stderr
    assert "LOADED True musa:0" in r.stdout


def test_autoload_can_be_disabled_and_explicit_import_works(run_py):
    code = r'''
    import sys, torch
    print("AUTO", "torch_musa" in sys.modules)
    import torch_musa
    print("OK", torch.ones(2, device="musa").sum().item())
    '''
    r = run_py(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "AUTO False" in r.stdout and "OK 2.0" in r.stdout


def test_bad_env_values_give_clear_errors(run_py):
    r = run_py("import torch; torch.zeros(1, device='musa')", env={"TORCH_MUSA_HOST_MEMORY": "lots"})
    out = r.stdout + r.stderr
    assert "TORCH_MUSA_HOST_MEMORY" in out
    r = run_py("import torch; torch.zeros(1, device='musa')", env={"TORCH_MUSA_DRIVER": "nonexistent"})
    assert "TORCH_MUSA_DRIVER" in r.stdout + r.stderr or "nonexistent" in r.stdout + r.stderr


def test_forked_child_cannot_reinitialize_musa(run_py):
    """As CUDA: a child forked after musa started raises CUDA's error instead of sharing the
    parent's device state (the host driver's expandable memory is a shared mapping)."""
    code = r'''
    import os, torch
    torch.ones(1, device="musa").sum().item()
    pid = os.fork()
    if pid == 0:
        try:
            torch.arange(4.0, device="musa")
            os._exit(3)
        except RuntimeError as e:
            os._exit(0 if "Cannot re-initialize MUSA in forked subprocess" in str(e) and "spawn" in str(e) else 4)
    _, status = os.waitpid(pid, 0)
    print("CHILD", os.waitstatus_to_exitcode(status))
    print("PARENT", torch.arange(4.0, device="musa").sum().item())
    '''
    r = run_py(code)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CHILD 0" in r.stdout and "PARENT 6.0" in r.stdout


def test_child_forked_before_musa_started_can_use_it(run_py):
    code = r'''
    import os, torch
    pid = os.fork()
    if pid == 0:
        os._exit(0 if torch.arange(4.0, device="musa").sum().item() == 6.0 else 3)
    _, status = os.waitpid(pid, 0)
    print("CHILD", os.waitstatus_to_exitcode(status))
    '''
    r = run_py(code)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CHILD 0" in r.stdout
