"""TorchScript (torch.jit.script / torch.jit.trace) models run on musa and match CPU."""
import copy
import io

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


class Control(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x, n: int):
        for _ in range(n):
            if bool(x.sum() > 0):
                x = torch.tanh(self.lin(x))
            else:
                x = self.lin(x) * 0.5
        return x


@torch.jit.script
def scripted_fn(x, y):
    z = x * y + torch.sin(x)
    return z.softmax(-1), z.argmax(-1)


def _pair():
    torch.manual_seed(0)
    m = Net().eval()
    return m, copy.deepcopy(m).musa()


def test_script_module_on_musa_matches_cpu():
    cpu, musa = _pair()
    x = torch.randn(2, 1, 8, 8)
    sc, sm = torch.jit.script(cpu), torch.jit.script(musa)
    out = sm(x.musa())
    assert out.is_musa
    torch.testing.assert_close(out.cpu(), sc(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.cpu(), cpu(x), rtol=1e-5, atol=1e-5)


def test_trace_module_on_musa_matches_cpu():
    cpu, musa = _pair()
    x = torch.randn(2, 1, 8, 8)
    tm = torch.jit.trace(musa, x.musa())
    out = tm(torch.randn(3, 1, 8, 8).musa() * 0 + x[:1].musa())
    ref = cpu(x[:1].expand(3, 1, 8, 8))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_script_control_flow_matches_cpu():
    torch.manual_seed(1)
    cpu = Control()
    sm = torch.jit.script(copy.deepcopy(cpu).musa())
    for seed in range(3):
        x = torch.randn(3, 6, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(sm(x.musa(), 3).cpu(), cpu(x, 3), rtol=1e-5, atol=1e-5)


def test_script_function_on_musa():
    x, y = torch.randn(4, 7), torch.randn(4, 7)
    (pm, im), (pc, ic) = scripted_fn(x.musa(), y.musa()), scripted_fn(x, y)
    assert pm.is_musa and im.is_musa
    torch.testing.assert_close(pm.cpu(), pc, rtol=1e-5, atol=1e-6)
    assert torch.equal(im.cpu(), ic)


def test_script_backward_matches_cpu():
    torch.manual_seed(2)
    cpu = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 1))
    m = copy.deepcopy(cpu).musa()
    sc, sm = torch.jit.script(cpu), torch.jit.script(m)
    x = torch.randn(5, 4)
    sc(x).sum().backward()
    sm(x.musa()).sum().backward()
    for pc, pm in zip(cpu.parameters(), m.parameters()):
        torch.testing.assert_close(pm.grad.cpu(), pc.grad, rtol=1e-5, atol=1e-6)


def test_script_device_strings_inside_graph():
    @torch.jit.script
    def make(n: int, dev: torch.device):
        return torch.arange(n, device=dev).float().cumsum(0)

    out = make(5, torch.device("musa"))
    assert out.is_musa
    assert torch.equal(out.cpu(), make(5, torch.device("cpu")))


def test_save_load_scripted_with_map_location():
    cpu, musa = _pair()
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(musa), buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    assert next(loaded.parameters()).is_musa
    buf.seek(0)
    loaded_cpu = torch.jit.load(buf, map_location="cpu")
    x = torch.randn(2, 1, 8, 8)
    torch.testing.assert_close(loaded(x.musa()).cpu(), cpu(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loaded_cpu(x), cpu(x), rtol=1e-5, atol=1e-5)
    # a cpu-saved module loads onto musa
    buf2 = io.BytesIO()
    torch.jit.save(torch.jit.script(cpu), buf2)
    buf2.seek(0)
    on_musa = torch.jit.load(buf2, map_location="musa")
    assert next(on_musa.parameters()).is_musa
    torch.testing.assert_close(on_musa(x.musa()).cpu(), cpu(x), rtol=1e-5, atol=1e-5)


def test_scripted_module_to_musa():
    cpu, _ = _pair()
    s = torch.jit.script(copy.deepcopy(cpu))
    s.to("musa")
    x = torch.randn(1, 1, 8, 8)
    torch.testing.assert_close(s(x.musa()).cpu(), cpu(x), rtol=1e-5, atol=1e-5)
