"""float8 arithmetic as torch_musa allows it: elementwise ops and comparisons on float8_e4m3fn /
float8_e5m2 musa tensors compute in float32 and come back in float8 (the op layer's widening);
other ops (reductions, scans) keep the error that says to upcast. Reference: the CPU computing
in float32 from the same float8 values, cast back to float8."""
import pytest
import torch

F8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def _pair(dtype):
    torch.manual_seed(0)
    return torch.randn(16).to(dtype), torch.randn(16).to(dtype)


def _bits(t):
    return t.cpu().view(torch.uint8)


@pytest.mark.parametrize("dtype", F8)
@pytest.mark.parametrize("fn", [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a / b, lambda a, b: -a, lambda a, b: a * 3,
    lambda a, b: torch.maximum(a, b), lambda a, b: a.clamp(-1, 1), lambda a, b: torch.relu(a),
    lambda a, b: torch.where(a > b, a, b),
], ids=["add", "sub", "div", "neg", "mul_scalar", "maximum", "clamp", "relu", "where"])
def test_elementwise_ops_in_float32_cast_back(device, dtype, fn):
    a, b = _pair(dtype)
    got = fn(a.to(device), b.to(device))
    ref = fn(a.float(), b.float()).to(dtype)
    assert got.dtype == dtype and got.device.type == "musa"
    assert torch.equal(_bits(got), ref.view(torch.uint8))


@pytest.mark.parametrize("dtype", F8)
def test_comparisons_give_bool(device, dtype):
    a, b = _pair(dtype)
    for op in (torch.lt, torch.le, torch.gt, torch.ge, torch.eq, torch.ne):
        got = op(a.to(device), b.to(device))
        assert got.dtype == torch.bool and torch.equal(got.cpu(), op(a.float(), b.float()))
    assert torch.equal((a.to(device) > 0.5).cpu(), a.float() > 0.5)


def test_in_place_on_float8_writes_float8(device):
    a, b = _pair(torch.float8_e4m3fn)
    x = a.to(device)
    x.add_(b.to(device))
    assert x.dtype == torch.float8_e4m3fn
    assert torch.equal(_bits(x), (a.float() + b.float()).to(torch.float8_e4m3fn).view(torch.uint8))


def test_mixed_float8_formats_are_refused_as_on_cpu(device):
    a, b = torch.ones(4).to(torch.float8_e4m3fn), torch.ones(4).to(torch.float8_e5m2)
    with pytest.raises(RuntimeError) as cpu_err:
        a + b
    with pytest.raises(RuntimeError) as musa_err:
        a.to(device) + b.to(device)
    assert str(cpu_err.value).split("\n")[0] == str(musa_err.value).split("\n")[0]

