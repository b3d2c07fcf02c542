"""torch_musa.multi_tensor_apply: Apex's applier and its scale / l2norm ops, against the CPU."""
import torch

from torch_musa.multi_tensor_apply import multi_tensor_applier, multi_tensor_l2norm, multi_tensor_scale


def _lists(device):
    torch.manual_seed(0)
    cpu = [torch.randn(5), torch.randn(3, 4), torch.randn(7).half()]
    return cpu, [t.to(device) for t in cpu]


def test_l2norm_total_and_per_tensor(device):
    cpu, musa = _lists(device)
    flag = torch.zeros(1, dtype=torch.int, device=device)
    total, per = multi_tensor_applier(multi_tensor_l2norm, flag, [musa], True)
    ref_per = torch.stack([t.float().norm() for t in cpu])
    torch.testing.assert_close(per.cpu(), ref_per)
    torch.testing.assert_close(total.cpu(), ref_per.norm().reshape(1))
    assert total.device == device and flag.item() == 0
    _, none = multi_tensor_applier(multi_tensor_l2norm, flag, [musa], False)
    assert none.numel() == 0


def test_scale_into_outputs_and_overflow_flag(device):
    cpu, musa = _lists(device)
    outs = [torch.empty_like(t, dtype=torch.float32) for t in musa]
    flag = torch.zeros(1, dtype=torch.int, device=device)
    multi_tensor_applier(multi_tensor_scale, flag, [musa, outs], 0.5)
    for o, c in zip(outs, cpu):
        torch.testing.assert_close(o.cpu(), c.float() * 0.5)
    assert flag.item() == 0
    musa[1][0, 0] = float("inf")
    multi_tensor_applier(multi_tensor_scale, flag, [musa, outs], 0.5)
    assert flag.item() == 1  # as Apex's kernel: an inf or NaN input raises the no-op flag
