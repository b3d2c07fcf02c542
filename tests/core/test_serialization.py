"""torch.save / torch.load with musa tensors, modules and map_location."""
import copy
import io

import pytest
import torch
import torch.nn as nn


def _roundtrip(obj, **load_kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kw)


def test_save_load_keeps_device_and_values():
    cpu = torch.randn(4, 5)
    m = cpu.musa()
    out = _roundtrip(m)
    assert out.device == torch.device("musa", 0)
    assert torch.equal(out.cpu(), cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool,
                                   torch.complex64])
def test_dtypes_roundtrip(dtype):
    cpu = (torch.randn(3, 4) * 5).to(dtype)
    out = _roundtrip(cpu.musa())
    assert out.dtype == dtype and out.is_musa
    assert torch.equal(out.cpu(), cpu)


def test_map_location_cpu():
    cpu = torch.randn(3, 3)
    out = _roundtrip(cpu.musa(), map_location="cpu")
    assert out.device.type == "cpu"
    assert torch.equal(out, cpu)


def test_map_location_musa_from_cpu_file():
    cpu = torch.randn(3, 3)
    out = _roundtrip(cpu, map_location="musa")
    assert out.is_musa and out.device.index == 0
    assert torch.equal(out.cpu(), cpu)
    out = _roundtrip(cpu, map_location=torch.device("musa"))
    assert out.is_musa and torch.equal(out.cpu(), cpu)


def test_map_location_musa1(two_devices):
    cpu = torch.randn(3, 3)
    out = _roundtrip(cpu.musa(), map_location="musa:1")
    assert out.device == torch.device("musa", 1)
    assert torch.equal(out.cpu(), cpu)
    # saved on musa:1 loads back on musa:1; a dict remaps it to musa:0
    t1 = cpu.to("musa:1")
    assert _roundtrip(t1).device == torch.device("musa", 1)
    assert _roundtrip(t1, map_location={"musa:1": "musa:0"}).device == torch.device("musa", 0)


def test_map_location_callable():
    cpu = torch.arange(5.0)
    out = _roundtrip(cpu.musa(), map_location=lambda storage, loc: storage)
    assert torch.equal(out.cpu(), cpu)


def test_views_share_storage_after_load():
    results = []
    for dev in ("cpu", "musa"):
        base = torch.arange(12.0, device=dev)
        la, lb = _roundtrip([base[2:6], base.view(3, 4)[1]])
        # views of one storage are saved once and still alias after loading
        assert la.untyped_storage().data_ptr() == lb.untyped_storage().data_ptr()
        la.fill_(-1)
        results.append(lb.cpu())
    assert torch.equal(results[1], results[0])


def test_module_state_dict_roundtrip(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)).musa()
    model(torch.randn(5, 4, device="musa"))
    path = tmp_path / "m.pt"
    torch.save(model.state_dict(), path)
    sd_cpu = torch.load(path, map_location="cpu")
    sd_musa = torch.load(path, map_location="musa")
    ref = {k: v.cpu() for k, v in model.state_dict().items()}
    for k in ref:
        assert sd_cpu[k].device.type == "cpu" and sd_musa[k].is_musa
        assert torch.equal(sd_cpu[k], ref[k]) and torch.equal(sd_musa[k].cpu(), ref[k])
    fresh = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    fresh.load_state_dict(sd_cpu)
    fresh.eval()
    model.eval()
    x = torch.randn(3, 4)
    torch.testing.assert_close(model(x.musa()).cpu(), fresh(x), rtol=1e-5, atol=1e-6)


def test_whole_module_and_optimizer_checkpoint(tmp_path):
    model = nn.Linear(3, 2).musa()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 3, device="musa")).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": model, "opt": opt.state_dict(), "step": 1}, path)
    ck = torch.load(path, weights_only=False)
    assert ck["model"].weight.is_musa
    assert torch.equal(ck["model"].weight.cpu(), model.weight.cpu())
    assert ck["opt"]["state"][0]["exp_avg"].is_musa
    ck2 = torch.load(path, map_location="cpu", weights_only=False)
    assert ck2["model"].weight.device.type == "cpu"
    torch.testing.assert_close(ck2["opt"]["state"][0]["exp_avg"], opt.state[model.weight]["exp_avg"].cpu())


def test_weights_only_load_of_musa_tensors():
    cpu = torch.randn(2, 2)
    out = _roundtrip({"w": cpu.musa()}, weights_only=True)
    assert out["w"].is_musa and torch.equal(out["w"].cpu(), cpu)


def test_noncontiguous_and_storage_offset():
    base = torch.randn(6, 8)
    t = base.musa().t()[1:, ::2]
    out = _roundtrip(t)
    assert out.shape == t.shape and out.stride() == t.stride()
    assert torch.equal(out.cpu(), base.t()[1:, ::2])


def test_deepcopy_musa_tensor_and_module():
    m = nn.Linear(2, 2).musa()
    c = copy.deepcopy(m)
    assert c.weight.is_musa and c.weight.data_ptr() != m.weight.data_ptr()
    assert torch.equal(c.weight.cpu(), m.weight.cpu())


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_map_location_cuda_without_cuda_names_musa_as_the_way_out(tmp_path):
    # torch.cuda's error for CUDA storages without CUDA, naming musa (and cpu) as the map_location to use
    path = tmp_path / "m.pt"
    torch.save(nn.Linear(3, 2).musa(), path)
    assert next(torch.load(path, weights_only=False).parameters()).device == torch.device("musa", 0)
    with pytest.raises(RuntimeError, match=r"torch.cuda.is_available\(\) is False.*map_location=torch.device\('musa'\)"):
        torch.load(path, map_location="cuda", weights_only=False)
