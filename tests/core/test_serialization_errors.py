"""Loading checkpoints across devices as torch_musa users do: a CUDA checkpoint on a machine
without CUDA says how to load it onto musa and loads there with map_location='musa' or under
CUDA compatibility; TorchScript modules round-trip musa <-> cpu as they do on the CPU."""
import io
import zipfile

import pytest
import torch


def _as_cuda_checkpoint(obj) -> bytes:
    """A checkpoint whose storages are tagged for CUDA, as torch.save writes on a CUDA machine:
    saved from musa, with the location tag rewritten (the same length, 'musa' -> 'cuda')."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    src, out = zipfile.ZipFile(io.BytesIO(buf.getvalue())), io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("data.pkl"):
                assert b"musa:0" in data
                data = data.replace(b"musa:0", b"cuda:0")
            dst.writestr(info, data)
    return out.getvalue()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_checkpoint_without_cuda_names_map_location_musa(device):
    state = {"w": torch.arange(4.0, device=device)}
    data = _as_cuda_checkpoint(state)
    with pytest.raises(RuntimeError, match="map_location='musa'"):
        torch.load(io.BytesIO(data))
    loaded = torch.load(io.BytesIO(data), map_location="musa")
    assert loaded["w"].device.type == "musa" and loaded["w"].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    assert torch.load(io.BytesIO(data), map_location="cpu")["w"].device.type == "cpu"


def test_torchscript_round_trips_musa_and_cpu_like_the_cpu(device):
    def round_trip(model_device, to):
        torch.manual_seed(0)
        m = torch.nn.Linear(3, 2).to(model_device)
        traced = torch.jit.trace(m, torch.randn(1, 3, device=model_device))
        buf = io.BytesIO()
        torch.jit.save(traced, buf)
        buf.seek(0)
        moved = torch.jit.load(buf).to(to)
        x = torch.randn(1, 3, generator=torch.Generator().manual_seed(1))
        return moved, moved(x.to(to)).cpu()

    ref_mod, ref_out = round_trip("cpu", "cpu")
    for src, dst in [("musa", "cpu"), ("cpu", "musa"), ("musa", "musa")]:
        mod, out = round_trip(src, dst)
        torch.testing.assert_close(out, ref_out)
        got = [(type(p), p.device.type, p.requires_grad) for p in mod.parameters()]
        want = [(type(p), dst, p.requires_grad) for p in ref_mod.parameters()]
        assert got == want  # what the CPU gives: TorchScript hands out its parameters as tensors
