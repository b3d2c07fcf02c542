"""Bad input gives the errors cuda gives: bad device index, mixed devices, OOM (with recovery), bad torch version."""
import pytest
import torch
import torch.nn as nn

import torch_musa._version_gate as version_gate


@pytest.mark.parametrize("make", [
    lambda n: torch.randn(2, device=f"musa:{n}"),
    lambda n: torch.zeros(2).to(f"musa:{n}"),
    lambda n: torch.zeros(2).musa(n),
    lambda n: torch.musa.set_device(n),
    lambda n: torch.musa.get_device_properties(n),
    lambda n: torch.musa.Stream(device=n),
    lambda n: torch.musa.synchronize(n),
    lambda n: torch.musa.memory_allocated(n),
    lambda n: torch.musa.device(n).__enter__(),
], ids=["factory", "to", "musa()", "set_device", "properties", "stream", "synchronize", "memory_allocated",
        "device_ctx"])
def test_bad_device_index(make):
    n = torch.musa.device_count()
    with pytest.raises(RuntimeError, match=rf"invalid musa device index {n}\b"):
        make(n)
    # still usable afterwards
    assert torch.musa.current_device() == 0
    assert torch.ones(1, device="musa").item() == 1.0


def test_negative_device_index_rejected_like_cuda():
    with pytest.raises(RuntimeError):
        torch.device("musa:-1")


def test_bad_device_type_for_musa_api():
    with pytest.raises(ValueError):
        torch.musa.set_device("cpu")
    with pytest.raises(ValueError):
        torch.musa.get_device_properties(torch.device("cpu"))


@pytest.mark.parametrize("op", [
    lambda m, c: m + c,
    lambda m, c: c + m,
    lambda m, c: m @ c,
    lambda m, c: torch.cat([m, c]),
    lambda m, c: m.add_(c),
    lambda m, c: torch.where(m > 0, c, m),
    lambda m, c: nn.functional.linear(m, c),
    lambda m, c: torch.addmm(m, m, c),
    lambda m, c: m.index_copy_(0, torch.tensor([0, 1, 2], device="musa"), c),
], ids=["add", "radd", "matmul", "cat", "add_", "where", "linear", "addmm", "index_copy_"])
def test_mixed_cpu_musa_non_scalar_raises_naming_both(op):
    m = torch.randn(3, 3, device="musa")
    c = torch.randn(3, 3)
    with pytest.raises(RuntimeError) as e:
        op(m, c)
    msg = str(e.value)
    # cuda: "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    assert "musa:0" in msg and "cpu" in msg, msg
    # and nothing was silently written
    assert m.is_musa


def test_module_with_cpu_input_raises():
    lin = nn.Linear(3, 2).musa()
    with pytest.raises(RuntimeError, match="cpu"):
        lin(torch.randn(4, 3))


def test_zero_dim_cpu_tensor_allowed_like_cuda():
    c = torch.randn(3, 4)
    m = c.musa()
    s = torch.tensor(2.5)
    for f in (lambda a, b: a + b, lambda a, b: b * a, lambda a, b: torch.where(a > 0, a, b),
              lambda a, b: a.mul_(b), lambda a, b: a.div(b), lambda a, b: a.abs().pow(b)):
        out = f(m.clone(), s)
        assert out.is_musa
        torch.testing.assert_close(out.cpu(), f(c.clone(), s))
    # python scalars too
    torch.testing.assert_close((m * 3 - 1).cpu(), c * 3 - 1)


def test_one_element_non_scalar_cpu_tensor_still_raises():
    # cuda only exempts 0-dim cpu tensors, not shape-(1,) ones
    m = torch.randn(3, device="musa")
    with pytest.raises(RuntimeError):
        m + torch.tensor([1.0])


def test_oom_raises_and_recovers_in_subprocess(run_py):
    code = r'''
    import torch
    MiB = 1 << 20
    assert torch.musa.get_device_properties(0).total_memory == 256 * MiB
    keep = torch.ones(64 * MiB // 4, device="musa")   # 64 MiB held
    try:
        torch.empty(512 * MiB, dtype=torch.uint8, device="musa")
    except torch.musa.OutOfMemoryError as e:
        msg = str(e)
        assert isinstance(e, torch.OutOfMemoryError) and isinstance(e, RuntimeError)
        # the message names the request and the device state, like cuda's
        assert "512.00 MiB" in msg, msg
        assert "free" in msg.lower() and "reserved" in msg.lower(), msg
        print("OOM-RAISED")
    else:
        raise SystemExit("no OOM")
    stats = torch.musa.memory_stats()
    assert stats["num_ooms"] >= 1, stats
    # the process is still usable: the held tensor is intact and new work succeeds
    assert keep.sum().item() == 64 * MiB // 4
    y = torch.randn(1024, 1024, device="musa")  # 4 MiB
    torch.testing.assert_close((y @ y.t()).cpu(), y.cpu() @ y.cpu().t(), rtol=1e-4, atol=1e-3)
    # freeing memory makes large allocations possible again
    del keep
    torch.musa.empty_cache()
    big = torch.empty(200 * MiB, dtype=torch.uint8, device="musa")
    big.fill_(1)
    assert big[-1].item() == 1
    # OOM under a training step with autograd also recovers
    x = torch.randn(1024, 1024, device="musa", requires_grad=True)
    try:
        (x.expand(64, 1024, 1024) * 2).sum().backward()
    except torch.musa.OutOfMemoryError:
        print("OOM2-RAISED")
    del big
    torch.musa.empty_cache()
    (x * 2).sum().backward()
    assert x.grad is not None
    print("RECOVERED")
    '''
    r = run_py(code, env={"TORCH_MUSA_HOST_MEMORY": "256MiB"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OOM-RAISED" in r.stdout and "OOM2-RAISED" in r.stdout and "RECOVERED" in r.stdout


def test_unsupported_torch_version_message(monkeypatch):
    assert version_gate.check() == version_gate.torch_version()
    monkeypatch.setattr(torch, "__version__", "2.5.1+cpu")
    with pytest.raises(ImportError) as e:
        version_gate.check()
    msg = str(e.value)
    assert "2.5.1" in msg
    for v in ("2.11", "2.15"):
        assert v in msg
    monkeypatch.setattr(torch, "__version__", "3.0.0")
    with pytest.raises(ImportError):
        version_gate.check()


def test_supported_versions_are_2_11_to_2_15(monkeypatch):
    for v in ("2.11.0", "2.11.0+cu126", "2.13.0+cpu", "2.13.1", "2.14.1", "2.15.0+cu130"):
        monkeypatch.setattr(torch, "__version__", v)
        version_gate.check()
    for v in ("2.10.0", "2.16.0"):
        monkeypatch.setattr(torch, "__version__", v)
        with pytest.raises(ImportError, match="2.11, 2.12, 2.13, 2.14, 2.15"):
            version_gate.check()


def test_interprocess_event_handle_from_garbage_is_an_error():
    with pytest.raises(RuntimeError, match="(?i)handle"):
        torch.musa.Event.from_ipc_handle(0, b"\0" * 64)
    with pytest.raises(ValueError, match="64 bytes"):
        torch.musa.Event.from_ipc_handle(0, b"short")


@pytest.mark.parametrize("make", [
    lambda: torch.randn(3, 3).to_sparse().to("musa").cumsum(0),
    lambda: torch.quantize_per_tensor(torch.randn(4, device="musa"), 0.1, 0, torch.qint8).cumsum(0),
], ids=["sparse", "quantized"])
def test_an_op_without_a_kernel_for_a_tensor_kind_gets_a_clear_error(make):
    # As on the cpu, but named for musa: never torch's "could not run ... 'SparseCPU' backend".
    with pytest.raises(NotImplementedError, match="has no kernel for .* first") as info:
        make()
    assert "could not run" not in str(info.value).lower()
    assert torch.ones(2, device="musa").sum().item() == 2.0


def test_a_build_for_another_torch_is_refused_at_import(monkeypatch):
    """The extension records the torch it was built against; another torch gets a clear ImportError."""
    from torch_musa import _build_info

    assert _build_info.TORCH_VERSION == torch.__version__.split("+")[0]
    version_gate.check_build()
    monkeypatch.setattr(_build_info, "TORCH_VERSION", "2.12.0")
    with pytest.raises(ImportError, match=r"built for torch 2\.12\.0.*install torch==2\.12\.0"):
        version_gate.check_build()
