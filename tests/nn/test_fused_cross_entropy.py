"""Fused 2-D cross entropy on musa: F.cross_entropy on 2-D musa logits with class targets takes
it (as torch_musa's does), with weights, ignore_index and every reduction; forward and gradients
against log_softmax + nll_loss in float64, all three dtypes; the other cases keep torch's path."""
import pytest
import torch
import torch.nn.functional as F

from tests.nn import fused_reference as ref

M, C = 12, 37


def _fused_calls(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return sum(e.count for e in prof.key_averages() if e.key == "musa_fused::_fused_cross_entropy_2d_forward")


@pytest.mark.parametrize("dtype", ref.DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
# 37: rows read element by element; 2600: in 16-byte packs, over several passes of a block and,
# backward, several column chunks (the cuda driver's kernels). The host driver's kernel: 37 its
# scalar loops, 700 its loops over ATen's softmax, 2600 ATen's ops only.
@pytest.mark.parametrize("classes", [C, 700, 2600])
def test_cross_entropy_matches_the_composition(dtype, reduction, weighted, classes):
    torch.manual_seed(0)
    x, t = torch.randn(M, classes) * 3, torch.randint(0, classes, (M,))
    t[3] = -100  # ignored row
    inputs = [x, t] + ([torch.rand(classes) + 0.5] if weighted else [])
    fused = lambda a, b, *w: F.cross_entropy(a, b, *(v.to(a.dtype) for v in w), reduction=reduction)  # noqa: E731
    reference = lambda a, b, *w: ref.cross_entropy(a, b, *w, reduction=reduction)  # noqa: E731
    ref.check_fwd_bwd(fused, reference, inputs, dtype, grad_of=[0])


def test_fused_path_is_taken_only_where_torch_musa_takes_it(device):
    x, t = torch.randn(M, C, device=device), torch.randint(0, C, (M,), device=device)
    assert _fused_calls(lambda: F.cross_entropy(x, t)) == 1
    assert _fused_calls(lambda: F.cross_entropy(x, t, ignore_index=5)) == 1
    # label smoothing, probability targets, 4-D logits, float64 and CPU tensors: torch's path
    probs = torch.softmax(torch.randn(M, C, device=device), -1)
    x4, t3 = torch.randn(2, C, 3, 2, device=device), torch.randint(0, C, (2, 3, 2), device=device)
    for call in (lambda: F.cross_entropy(x, t, label_smoothing=0.1), lambda: F.cross_entropy(x, probs),
                 lambda: F.cross_entropy(x4, t3), lambda: F.cross_entropy(x.double(), t),
                 lambda: F.cross_entropy(x.cpu(), t.cpu())):
        assert _fused_calls(call) == 0
    torch.testing.assert_close(F.cross_entropy(x, t, label_smoothing=0.1).cpu(),
                               F.cross_entropy(x.cpu(), t.cpu(), label_smoothing=0.1))
    torch.testing.assert_close(F.cross_entropy(x4, t3).cpu(), F.cross_entropy(x4.cpu(), t3.cpu()))
    # every row ignored: mean is nan and the gradient zero, as torch's
    xg = x.detach().clone().requires_grad_()
    loss = F.cross_entropy(xg, torch.full_like(t, -100))
    loss.backward()
    assert torch.isnan(loss).item() and torch.equal(xg.grad.cpu(), torch.zeros(M, C))
    assert torch.nn.CrossEntropyLoss()(x, t).dtype == torch.float32
    with pytest.raises(RuntimeError, match="same device"):  # a CPU target: torch's error, as for cuda
        F.cross_entropy(x, t.cpu())


def test_out_of_range_target_is_an_error_or_nan(device):
    x, t = torch.randn(4, C, device=device), torch.tensor([0, 1, C + 3, 2], device=device)
    if torch.musa.get_driver_name() == "host":
        with pytest.raises(IndexError, match="out of bounds"):
            F.cross_entropy(x, t)
    else:  # a GPU kernel cannot raise: the row's loss is NaN instead of a read past the row
        assert torch.isnan(F.cross_entropy(x, t)).item()


def test_the_op_reduces_itself_and_returns_the_mean_denominator(device):
    """One fused op forward, whatever the reduction (no separate sum/count/divide ops): its loss
    and denominator against the composition, and a clear error for an unknown reduction."""
    torch.manual_seed(0)
    x, t, w = torch.randn(M, C), torch.randint(0, C, (M,)), torch.rand(C) + 0.5
    t[[2, 7]] = -100
    for red, name in ((0, "none"), (1, "mean"), (2, "sum")):
        loss, lse, denom = torch.ops.musa_fused._fused_cross_entropy_2d_forward(
            x.to(device), t.to(device), w.to(device), -100, red, torch.float64)
        assert loss.dtype == torch.float64 and loss.shape == ((M,) if red == 0 else ())
        torch.testing.assert_close(loss.cpu(), ref.cross_entropy(x.double(), t, w.double(), reduction=name),
                                   rtol=1e-5, atol=1e-5)  # (computed in float32)
        torch.testing.assert_close(lse.cpu(), torch.logsumexp(x, -1))
        torch.testing.assert_close(denom.cpu(), w[t[t != -100]].sum())
    xd, td = x.to(device), t.to(device)
    # (the host driver's kernel itself calls ATen's CPU ops: those run inside the fused op)
    outside = ref.ops_outside_fused_ops(lambda: F.cross_entropy(xd, td))
    assert not outside & {"aten::sum", "aten::div", "aten::ne", "aten::_to_copy"}, outside
    with pytest.raises(ValueError, match="reduction must be 0 \\(none\\), 1 \\(mean\\) or 2 \\(sum\\)"):
        torch.ops.musa_fused._fused_cross_entropy_2d_forward(x.to(device), t.to(device), None, -100, 3)


def test_backward_makes_no_gradient_for_lse_or_denom(device):
    # Only the loss is differentiable: the engine passes no zeros for the two other outputs
    # (each would be an allocation and a fill kernel every step), and the gradient is torch's.
    x = torch.randn(M, C, device=device, requires_grad=True)
    t = torch.randint(0, C, (M,), device=device)
    loss = F.cross_entropy(x, t)
    grad = torch.ones_like(loss)  # (made outside: the engine would fill one)
    assert not ref.ops_outside_fused_ops(lambda: loss.backward(grad)) & {"aten::zeros", "aten::zeros_like",
                                                                         "aten::fill_", "aten::zero_"}
    xc = x.detach().cpu().requires_grad_()
    F.cross_entropy(xc, t.cpu()).backward()
    torch.testing.assert_close(x.grad.cpu(), xc.grad)
