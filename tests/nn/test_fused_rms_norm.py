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


def test_backward_makes_no_gradient_for_invvar(device):
    # invvar is not differentiable: the engine passes no zeros for it, and the gradient is torch's
    m = torch.nn.RMSNorm(16, eps=1e-5).to(device)
    x = torch.randn(4, 16, device=device, requires_grad=True)
    out = m(x)
    grad = torch.randn_like(out)
    assert not ref.ops_outside_fused_ops(lambda: out.backward(grad)) & {"aten::zeros", "aten::zeros_like",
                                                                        "aten::fill_", "aten::zero_"}
    xc, mc = x.detach().cpu().requires_grad_(), torch.nn.RMSNorm(16, eps=1e-5)
    mc(xc).backward(grad.cpu())
    torch.testing.assert_close(x.grad.cpu(), xc.grad)


def test_bad_inputs_name_the_problem(device):
    x = torch.randn(4, 16, device=device)
    with pytest.raises(ValueError, match="does not match the input's trailing"):
        torch.ops.musa_fused._fused_rmsnorm_forward(x, [8], 1e-5)
    with pytest.raises(ValueError, match="they must match"):
        torch.ops.musa_fused._fused_rmsnorm_forward(x, [16], 1e-5, torch.ones(16, device=device).half())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_torch_fused_rms_norm_op_on_musa(dtype):
    """torch's aten::_fused_rms_norm (CUDA/MPS kernels only) takes the fused op on musa, with its
    keepdim rstd and torch's autograd formula; float64 takes torch's decomposition."""
    if not hasattr(torch.ops.aten, "_fused_rms_norm_backward"):
        pytest.skip("this torch has no aten::_fused_rms_norm_backward")
    torch.manual_seed(0)
    x, w = torch.randn(3, 2, 8, dtype=dtype), torch.randn(8, dtype=dtype)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    y, r = torch.ops.aten._fused_rms_norm(xc, [8], wc, 1e-5)
    g = torch.randn_like(y)
    y.backward(g)
    xm, wm = x.to("musa").requires_grad_(), w.to("musa").requires_grad_()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        ym, rm = torch.ops.aten._fused_rms_norm(xm, [8], wm, 1e-5)
        ym.backward(g.to("musa"))
    fused = any(e.key == "musa_fused::_fused_rmsnorm_backward" for e in prof.key_averages())
    assert fused == (dtype != torch.float64)
    assert rm.shape == r.shape == (3, 2, 1) and rm.dtype == r.dtype
    tol = dict(atol=3e-2, rtol=3e-2) if dtype == torch.bfloat16 else {}
    for got, want in ((ym, y), (rm, r), (xm.grad, xc.grad), (wm.grad, wc.grad)):
        torch.testing.assert_close(got.cpu(), want, **tol)
