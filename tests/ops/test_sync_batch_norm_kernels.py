"""SyncBatchNorm's kernels on musa (ATen has them for CUDA only; the host driver computes them
itself) against batch norm on the CPU: the statistics, the normalization, gathering per-rank
statistics into the global ones with running-stat updates, and the backward pair."""
import pytest
import torch
import torch.nn.functional as F


def _data(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 4, 5, 3, generator=g).to(dtype)
    w, b = torch.randn(4, generator=g), torch.randn(4, generator=g)
    return x, w, b


def test_stats_and_elemt_are_training_batch_norm(device):
    x, w, b = _data()
    mean, invstd = torch.batch_norm_stats(x.to(device), 1e-5)
    torch.testing.assert_close(mean.cpu(), x.mean((0, 2, 3)))
    torch.testing.assert_close(invstd.cpu(), (x.var((0, 2, 3), unbiased=False) + 1e-5).rsqrt())
    y = torch.batch_norm_elemt(x.to(device), w.to(device), b.to(device), mean, invstd, 1e-5)
    torch.testing.assert_close(y.cpu(), F.batch_norm(x, None, None, w, b, training=True, eps=1e-5),
                               rtol=1e-5, atol=1e-5)


def test_gather_stats_of_two_ranks_are_the_global_ones(device):
    x, _, _ = _data()
    halves = [x[:2], x[2:]]  # uneven shares: counts 2*5*3 and 4*5*3
    stats = [torch.batch_norm_stats(h.to(device), 1e-5) for h in halves]
    means, invstds = torch.stack([s[0] for s in stats]), torch.stack([s[1] for s in stats])
    counts = torch.tensor([h.numel() / h.size(1) for h in halves], device=device)
    rm, rv = torch.zeros(4, device=device), torch.ones(4, device=device)
    mean, invstd = torch.batch_norm_gather_stats_with_counts(x.to(device), means, invstds, rm, rv, 0.1, 1e-5, counts)
    ref_rm, ref_rv = torch.zeros(4), torch.ones(4)
    F.batch_norm(x, ref_rm, ref_rv, training=True, momentum=0.1, eps=1e-5)
    torch.testing.assert_close(mean.cpu(), x.mean((0, 2, 3)), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(invstd.cpu(), (x.var((0, 2, 3), unbiased=False) + 1e-5).rsqrt(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(rm.cpu(), ref_rm, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(rv.cpu(), ref_rv, rtol=1e-4, atol=1e-5)


def test_backward_pair_is_batch_norm_backward(device):
    x, w, b = _data()
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    out = F.batch_norm(xr, None, None, wr, br, training=True, eps=1e-5)
    dy = torch.randn_like(out)
    out.backward(dy)
    xm, wm, dym = x.to(device), w.to(device), dy.to(device)
    mean, invstd = torch.batch_norm_stats(xm, 1e-5)
    sum_dy, sum_dy_xmu, gw, gb = torch.batch_norm_backward_reduce(dym, xm, mean, invstd, wm, True, True, True)
    count = torch.tensor([x.numel() // x.size(1)], dtype=torch.int32, device=device)
    gx = torch.batch_norm_backward_elemt(dym, xm, mean, invstd, wm, sum_dy, sum_dy_xmu, count)
    torch.testing.assert_close(gx.cpu(), xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gw.cpu(), wr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gb.cpu(), br.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_inputs_keep_float32_statistics(device, dtype):
    x, w, b = _data(dtype)
    mean, invstd = torch.batch_norm_stats(x.to(device), 1e-5)
    assert mean.dtype == invstd.dtype == torch.float32  # CUDA's accumulation type
    y = torch.batch_norm_elemt(x.to(device), w.to(device), b.to(device), mean, invstd, 1e-5)
    assert y.dtype == dtype
    ref = F.batch_norm(x.float(), None, None, w, b, training=True, eps=1e-5)
    torch.testing.assert_close(y.cpu().float(), ref, rtol=2e-2, atol=2e-2)
