"""Fused RMSNorm on musa (torch_musa's _fused_rmsnorm_forward/backward): the op, F.rms_norm and
nn.RMSNorm taking it, forward and gradients (input and weight) against the float64 composition,
all three dtypes; other devices keep torch's composite."""
import pytest
import torch
import torch.nn.functional as F

from tests.nn import fused_reference as ref


def _fused_calls(fn):
    """How many times fn() runs the fused forward (counted by a profiler of dispatched ops)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return sum(e.count for e in prof.key_averages() if e.key == "musa_fused::_fused_rmsnorm_forward")


@pytest.mark.parametrize("dtype", ref.DTYPES)
@pytest.mark.parametrize("shape,norm", [((6, 32), (32,)), ((2, 3, 4, 10), (4, 10))])
def test_rms_norm_matches_the_composition(dtype, shape, norm):
    torch.manual_seed(0)
    x, w = torch.randn(shape) * 3, torch.randn(norm)
    ref.check_fwd_bwd(lambda a, b: F.rms_norm(a, norm, b, 1e-6), lambda a, b: ref.rms_norm(a, norm, b, 1e-6),
                      [x, w], dtype)
    ref.check_fwd_bwd(lambda a: torch.ops.musa_fused._fused_rmsnorm_forward(a, list(norm), 1e-6)[0],
                      lambda a: ref.rms_norm(a, norm, None, 1e-6), [x], dtype)


def test_musa_takes_the_fused_path_and_cpu_does_not(device):
    m = torch.nn.RMSNorm(16, eps=1e-5).to(device)
    x = torch.randn(4, 16, device=device)
    assert _fused_calls(lambda: m(x)) == 1
    out, invvar = torch.ops.musa_fused._fused_rmsnorm_forward(x, [16], 1e-5, m.weight)
    assert invvar.dtype == torch.float32 and invvar.shape == (4,)
    torch.testing.assert_close(m(x), out)
    # eps=None is torch's default (float32's epsilon), as the CPU computes it
    torch.testing.assert_close(F.rms_norm(x, (16,)).cpu(), F.rms_norm(x.cpu(), (16,)))
    assert _fused_calls(lambda: F.rms_norm(x.cpu(), (16,))) == 0
    # float64 and a weight of another dtype take torch's composite on musa, with CPU's results
    assert _fused_calls(lambda: F.rms_norm(x.double(), (16,))) == 0
    torch.testing.assert_close(F.rms_norm(x.half(), (16,), m.weight).cpu(), F.rms_norm(x.half().cpu(), (16,),
                               m.weight.cpu()))


def test_bad_inputs_name_the_problem(device):
    x = torch.randn(4, 16, device=device)
    with pytest.raises(ValueError, match="does not match the input's trailing"):
        torch.ops.musa_fused._fused_rmsnorm_forward(x, [8], 1e-5)
    with pytest.raises(ValueError, match="they must match"):
        torch.ops.musa_fused._fused_rmsnorm_forward(x, [16], 1e-5, torch.ones(16, device=device).half())
