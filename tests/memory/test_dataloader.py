"""DataLoader feeding musa: pinned memory, worker processes, non_blocking transfers."""
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


class _Squares(Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, i):
        return torch.full((3,), float(i)), torch.tensor(i * i)


def test_pin_memory_tensor():
    t = torch.randn(16)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and not t.is_pinned()
    assert torch.equal(p, t)
    assert p.device.type == "cpu"
    # pinning for the musa device explicitly is accepted, like pin_memory("cuda")
    assert torch.empty(4, pin_memory=True).is_pinned()


def test_pinned_non_blocking_roundtrip():
    p = torch.randn(1000).pin_memory()
    m = p.to("musa", non_blocking=True)
    out = torch.empty(1000).pin_memory()
    out.copy_(m, non_blocking=True)
    torch.musa.current_stream().synchronize()
    assert torch.equal(out, p)


def _expected():
    return [(torch.full((3,), float(i)), torch.tensor(i * i)) for i in range(20)]


def _check_loader(loader, batch=4):
    exp = _expected()
    seen = 0
    for bi, (x, y) in enumerate(loader):
        assert x.is_pinned() == loader.pin_memory
        mx, my = x.to("musa", non_blocking=True), y.to("musa", non_blocking=True)
        assert mx.is_musa
        ref_x = torch.stack([e[0] for e in exp[bi * batch:(bi + 1) * batch]])
        ref_y = torch.stack([e[1] for e in exp[bi * batch:(bi + 1) * batch]])
        torch.testing.assert_close((mx * 2).cpu(), ref_x * 2)
        assert torch.equal(my.cpu(), ref_y)
        seen += len(x)
    assert seen == 20


def test_dataloader_pin_memory_main_process():
    _check_loader(DataLoader(_Squares(), batch_size=4, pin_memory=True))


def test_dataloader_pin_memory_workers():
    loader = DataLoader(_Squares(), batch_size=4, pin_memory=True, num_workers=2)
    _check_loader(loader)


def test_dataloader_workers_after_musa_was_used():
    # musa was initialised in this process before forking the workers (the default start method on Linux)
    torch.randn(4, device="musa").sum().item()
    assert torch.musa.is_initialized()
    _check_loader(DataLoader(_Squares(), batch_size=4, pin_memory=True, num_workers=2, persistent_workers=False))


def test_dataloader_pin_memory_device_musa():
    loader = DataLoader(_Squares(), batch_size=4, pin_memory=True, pin_memory_device="musa")
    _check_loader(loader)


def test_training_loop_from_loader_matches_cpu():
    g = torch.Generator().manual_seed(0)
    ds = TensorDataset(torch.randn(32, 5, generator=g), torch.randn(32, 1, generator=g))
    torch.manual_seed(0)
    ref = torch.nn.Linear(5, 1)
    m = torch.nn.Linear(5, 1)
    m.load_state_dict(ref.state_dict())
    m.musa()
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_m = torch.optim.SGD(m.parameters(), lr=0.1)
    for model, opt, dev, kw in ((ref, opt_r, "cpu", {}), (m, opt_m, "musa", dict(pin_memory=True, num_workers=2))):
        for x, y in DataLoader(ds, batch_size=8, **kw):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x.to(dev, non_blocking=True)), y.to(dev, non_blocking=True)).backward()
            opt.step()
    torch.testing.assert_close(m.weight.detach().cpu(), ref.weight.detach(), rtol=1e-5, atol=1e-6)
