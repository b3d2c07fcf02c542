"""enable_cuda_compat(): torch.cuda.*, "cuda" devices, .cuda(), amp, checkpoints,
backends flags and the nccl backend name are served by musa; disable undoes it."""
import os
import tempfile
import warnings

import pytest
import torch
import torch.nn as nn

from tests.tools.conftest import CORE_MISSING


@pytest.fixture
def compat(musa):
    from torch_musa import cuda_compat

    cuda_compat.enable_cuda_compat()
    try:
        yield cuda_compat
    finally:
        cuda_compat.disable_cuda_compat()


def test_torch_cuda_api_is_musa(compat, musa):
    assert torch.cuda.is_available() is True
    assert torch.cuda.device_count() == musa.device_count()
    assert torch.cuda.get_device_name(0) == musa.get_device_name(0)
    torch.cuda.set_device(1)
    assert musa.current_device() == 1 and torch.cuda.current_device() == 1
    torch.cuda.set_device(torch.device("cuda:0"))  # a CUDA device object is accepted
    assert musa.current_device() == 0
    before = torch.cuda.memory_allocated()
    x = torch.empty(1024, device="cuda")
    assert torch.cuda.memory_allocated() == musa.memory_allocated() >= before + 4096
    s = torch.cuda.Stream()
    assert isinstance(s, musa.Stream)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    with torch.cuda.stream(s):
        y = x.fill_(1.0) * 2
    s.synchronize()
    end.record()
    torch.cuda.synchronize()
    assert start.elapsed_time(end) >= 0
    assert y.device.type == "musa" and float(y.sum()) == 2048.0
    torch.cuda.manual_seed(7)
    a = torch.randn(3, device="cuda")
    musa.manual_seed(7)
    torch.testing.assert_close(torch.randn(3, device="musa"), a)
    with torch.cuda.nvtx.range("region"):
        torch.cuda.nvtx.range_push("x")
        torch.cuda.nvtx.range_pop()
    assert issubclass(torch.cuda.OutOfMemoryError, musa.OutOfMemoryError) or (
        torch.cuda.OutOfMemoryError is musa.OutOfMemoryError
    )


def test_cuda_device_arguments_mean_musa(compat):
    assert torch.randn(2, device="cuda").device == torch.device("musa:0")
    assert torch.zeros(2, device="cuda:1").device == torch.device("musa:1")
    assert torch.ones(2, device=torch.device("cuda", 1)).device == torch.device("musa:1")
    assert torch.arange(3, device=1).device == torch.device("musa:1")
    assert torch.tensor([1, 2], device="cuda").device.type == "musa"
    cpu = torch.arange(4.0)
    for moved in (cpu.to("cuda"), cpu.to(torch.device("cuda:0")), cpu.cuda(), cpu.cuda(0), cpu.to("cuda", torch.float16)):
        assert moved.device == torch.device("musa:0")
        torch.testing.assert_close(moved.cpu().float(), cpu)
    assert cpu.cuda(1).device == torch.device("musa:1")
    assert cpu.cuda("cuda:1").device == torch.device("musa:1")
    assert cpu.to("cuda").is_cuda is True and cpu.is_cuda is False
    assert torch.empty_like(cpu, device="cuda").device.type == "musa"
    # torch.device("cuda") keeps its type so script logic like `device.type == "cuda"` works
    assert torch.device("cuda:0").type == "cuda"


def test_module_cuda_and_to(compat):
    m = nn.Linear(3, 2)
    ref = m(torch.ones(1, 3))
    m.cuda()
    assert all(p.device == torch.device("musa:0") for p in m.parameters())
    torch.testing.assert_close(m(torch.ones(1, 3, device="cuda")).cpu(), ref)
    m2 = nn.Linear(3, 2).to(torch.device("cuda:1"))
    assert m2.weight.device == torch.device("musa:1")
    m3 = nn.Linear(3, 2).cuda(1)
    assert m3.weight.device == torch.device("musa:1")
    with pytest.raises(ValueError, match="Invalid device"):
        torch.ones(1).cuda("cpu")


def test_autocast_and_grad_scaler(compat):
    m = nn.Linear(8, 4).cuda()
    x = torch.randn(2, 8, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("cuda")
        assert m(x).dtype == torch.bfloat16
    with torch.autocast(device_type="cuda"):
        assert m(x).dtype == torch.float16
    with torch.cuda.amp.autocast():
        assert m(x).dtype == torch.float16
    scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    w0 = m.weight.detach().clone()
    with torch.autocast("cuda"):
        loss = m(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0
    assert not torch.equal(m.weight.detach(), w0)
    assert isinstance(torch.cuda.amp.GradScaler(), torch.amp.grad_scaler.GradScaler)


def test_backends_flags_are_accepted(compat, monkeypatch):
    # torch.testing._internal (imported by the OpInfo sweep in the same pytest
    # run) freezes global backend flags; a user script runs without that.
    monkeypatch.setitem(torch.backends.flags_frozen.__globals__, "__allow_nonbracketed_mutation_flag", True)
    old = (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.deterministic)
    try:
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.deterministic = True
        torch.backends.cuda.matmul.allow_tf32 = True
        assert torch.backends.cudnn.benchmark and torch.backends.cuda.matmul.allow_tf32
        a, b = torch.randn(16, 16, device="cuda"), torch.randn(16, 16, device="cuda")
        torch.testing.assert_close((a @ b).cpu(), a.cpu() @ b.cpu())
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.deterministic = old


def _save_as_cuda_checkpoint(obj, path):
    """torch.save, but storages are tagged 'cuda:N' as on a CUDA machine."""
    import torch.serialization as ser

    def tag(storage):
        if storage.device.type == "musa":
            return f"cuda:{storage.device.index or 0}"
        return None

    ser.register_package(-1, tag, lambda obj, location: None)
    entry = ser._package_registry[-1] if ser._package_registry[-1][1] is tag else next(
        e for e in ser._package_registry if e[1] is tag
    )
    try:
        torch.save(obj, path)
    finally:
        ser._package_registry.remove(entry)


def test_cuda_checkpoints_load_on_musa(musa, tmp_path):
    from torch_musa import cuda_compat

    path = tmp_path / "ckpt.pt"
    w = torch.randn(3, 3, device="musa")
    _save_as_cuda_checkpoint({"w": w}, path)
    if not torch.backends.cuda.is_built():
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(path)  # what a CPU-only torch says about a CUDA checkpoint
    cuda_compat.enable_cuda_compat()
    try:
        loaded = torch.load(path)
        assert loaded["w"].device == torch.device("musa:0")
        torch.testing.assert_close(loaded["w"].cpu(), w.cpu())
        assert torch.load(path, map_location="cuda:1")["w"].device == torch.device("musa:1")
        assert torch.load(path, map_location={"cuda:0": "cuda:1"})["w"].device == torch.device("musa:1")
        assert torch.load(path, map_location="cpu")["w"].device.type == "cpu"
    finally:
        cuda_compat.disable_cuda_compat()


def test_translate_backend_names():
    if CORE_MISSING:
        pytest.skip(CORE_MISSING)
    import torch.distributed as dist
    from torch_musa.cuda_compat import translate_backend

    target = "mccl" if "mccl" in dist.Backend.backend_list else "gloo"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert translate_backend("nccl") == target
        assert translate_backend("NCCL") == target
        assert translate_backend("gloo") == "gloo"
        assert translate_backend(None) is None
        spec = translate_backend("cpu:gloo,cuda:nccl")
    assert spec == ("cpu:gloo,musa:mccl" if target == "mccl" else "cpu:gloo")


def test_nccl_process_group_is_served(compat, tmp_path):
    import torch.distributed as dist

    assert dist.is_nccl_available() is True
    store = f"file://{tmp_path / 'store'}"
    has_mccl = "mccl" in dist.Backend.backend_list
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist.init_process_group("nccl", init_method=store, rank=0, world_size=1)
    try:
        if has_mccl:
            assert dist.get_backend() == "mccl"
            t = torch.ones(3, device="cuda")
        else:
            assert dist.get_backend() == "gloo"
            assert any("mapped to 'gloo'" in str(w.message) for w in caught)
            t = torch.ones(3)
        dist.all_reduce(t)
        assert t.tolist() == [1.0, 1.0, 1.0]
    finally:
        dist.destroy_process_group()


def test_environment_variables_are_copied(musa, monkeypatch):
    from torch_musa import cuda_compat

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    monkeypatch.delenv("MUSA_VISIBLE_DEVICES", raising=False)
    cuda_compat.enable_cuda_compat()
    try:
        assert os.environ["MUSA_VISIBLE_DEVICES"] == "1,0"
    finally:
        cuda_compat.disable_cuda_compat()
    assert "MUSA_VISIBLE_DEVICES" not in os.environ


def test_disable_restores_stock_behaviour(musa):
    from torch_musa import cuda_compat

    stock_available = torch.cuda.is_available()
    stock_to = torch.Tensor.cuda
    cuda_compat.enable_cuda_compat()
    cuda_compat.enable_cuda_compat()  # idempotent
    assert cuda_compat.is_cuda_compat_enabled()
    cuda_compat.disable_cuda_compat()
    assert not cuda_compat.is_cuda_compat_enabled()
    assert torch.cuda.is_available() == stock_available
    assert torch.Tensor.cuda is stock_to
    assert torch.autocast is torch.amp.autocast_mode.autocast
    if not torch.backends.cuda.is_built():
        with pytest.raises((RuntimeError, AssertionError)):
            torch.zeros(1, device="cuda")
        assert torch.ones(1, device="musa").is_cuda is False
