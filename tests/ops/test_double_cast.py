"""Double casting (TORCH_USE_MUSA_DOUBLE_CAST): float64 ops on musa compute in float32 and come back
as float64, as torch_musa does; data movement keeps float64's bits; off by default. The reference
is the CPU computing the same op in float32, cast to float64."""
import pytest
import torch
import torch.nn.functional as F

from tests.conftest import run_python


@pytest.fixture
def double_cast():
    torch.musa._C._set_double_cast(True)
    torch.musa.ops.reset_widened_op_counts()
    yield
    torch.musa._C._set_double_cast(False)


def _f32_ref(fn, *cpu_args):
    return fn(*[a.float() if a.is_floating_point() else a for a in cpu_args]).double()


def _assert_float32_computation(got, ref):
    """got holds float32 values (computed in float32, cast back) equal to the CPU's float32 result:
    bit for bit on the host driver, within float32 rounding on the cuda driver (CUDA's kernels)."""
    if got.dtype == torch.float64:
        assert torch.equal(got.float().double(), got)
    if torch.musa.get_driver_name() == "host" or not ref.is_floating_point():
        assert torch.equal(got, ref)
    else:
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_off_by_default_float64_stays_exact(device):
    assert torch.musa._C._double_cast_enabled() is False
    x = torch.randn(64, dtype=torch.float64)
    got = (x.to(device) * 1.0000001).exp().cpu()
    assert not torch.equal(got.float().double(), got)  # float64 all the way: not float32 values
    torch.testing.assert_close(got, (x * 1.0000001).exp(), rtol=1e-14, atol=0)  # CUDA's exp may differ by an ulp


@pytest.mark.parametrize("fn", [
    lambda a, b: a * b + 1.0000001,
    lambda a, b: torch.mm(a, b.t()),
    lambda a, b: (a.exp() / b.abs().add(1)).sum(dim=1),
    lambda a, b: F.softmax(a, dim=-1),
    lambda a, b: torch.sigmoid(a).lt(b.sigmoid()),
])
def test_ops_compute_in_float32_and_return_float64(device, double_cast, fn):
    a, b = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    got = fn(a.to(device), b.to(device))
    ref = _f32_ref(fn, a, b) if fn(a, b).dtype == torch.float64 else fn(a.float(), b.float())
    assert got.dtype == fn(a, b).dtype  # the dtype a float64 program expects
    _assert_float32_computation(got.cpu(), ref)
    assert torch.musa.ops.widened_op_counts()  # counted with the other dtype conversions


def test_in_place_and_out_write_float64_results(device, double_cast):
    a, b = torch.randn(32, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    x = a.to(device)
    x.mul_(b.to(device))
    assert x.dtype == torch.float64 and torch.equal(x.cpu(), (a.float() * b.float()).double())
    out = torch.empty(0, dtype=torch.float64, device=device)
    torch.add(a.to(device), b.to(device), out=out)
    assert torch.equal(out.cpu(), (a.float() + b.float()).double())


def test_copies_views_indexing_and_item_keep_float64_bits(device, double_cast):
    x = torch.tensor([1 + 2.0**-40, 3.0, 2.0**-60], dtype=torch.float64)  # not float32-representable
    m = x.to(device)
    assert torch.equal(m.cpu(), x) and torch.equal(m.clone().cpu(), x)
    assert m[0].item() == x[0].item()
    assert torch.equal(m.view(3, 1).t().contiguous().cpu(), x.view(1, 3))
    assert torch.equal(m[torch.tensor([2, 0], device=device)].cpu(), x[[2, 0]])
    assert torch.equal(torch.cat([m, m]).cpu(), torch.cat([x, x]))
    assert torch.musa.ops.widened_op_counts() == {}


def test_a_float64_model_runs_and_returns_float64(device, double_cast):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 5)).double()
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    ref = model.float()(x.float()).double()
    out = model.double().to(device)(x.to(device))
    out.sum().backward()
    assert out.dtype == torch.float64 and model[0].weight.grad.dtype == torch.float64
    torch.testing.assert_close(out.detach().cpu(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value, on", [("on", True), ("0", False)])
def test_env_var_switches_it_at_start(value, on):
    r = run_python("import torch; print(torch.musa._C._double_cast_enabled())",
                   env={"TORCH_USE_MUSA_DOUBLE_CAST": value})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == str(on)
