"""Fused attention on musa through torch's "overrideable" SDPA backend.

Where CUDA's chooser picks flash attention, musa answers the overrideable backend and runs the
kernel device's flash attention for it (cuda driver). The host keeps the CPU's flash variant for
F.scaled_dot_product_attention, and the overrideable op itself runs there on the CPU's flash
kernels, so its forward and backward are checked on both drivers.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from tests.conftest import flash_attention_only

ON_GPU = torch.musa.get_driver_name() == "cuda" if torch.musa.is_available() else False
OVERRIDEABLE = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default
# flash attention computes in half precision on CUDA; the CPU's takes float32 too
DTYPE, TOL = (torch.float16, 2e-3) if ON_GPU else (torch.float32, 1e-5)


def _qkv(b=2, h=3, s=40, d=16, seed=0, dtype=DTYPE):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, s, d, generator=g).to(dtype) for _ in range(3)]


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(func.name())
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("causal,head", [(False, 16), (True, 16), (True, 12)])
def test_overrideable_op_matches_cpu_attention(causal, head):
    # (a head size that is not a multiple of 8 is padded for CUDA's flash kernels)
    q, k, v = _qkv(d=head)
    grad = torch.randn(q.shape).to(DTYPE)
    ref_in = [t.detach().float().requires_grad_() for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal, scale=0.3)
    ref.backward(grad.float())

    musa_in = [t.detach().musa().requires_grad_() for t in (q, k, v)]
    out, lse, *_, seed, offset, _ = OVERRIDEABLE(*musa_in, is_causal=causal, scale=0.3)
    assert out.is_musa and out.dtype == DTYPE and lse.shape == q.shape[:3]
    # the random state has the op's fake shapes (compiled graphs check them)
    assert seed.shape == offset.shape == () and seed.dtype == offset.dtype == torch.int64
    out.backward(grad.musa())
    torch.testing.assert_close(out.float().cpu(), ref.detach(), rtol=TOL, atol=TOL)
    for got, want in zip(musa_in, ref_in):
        torch.testing.assert_close(got.grad.float().cpu(), want.grad, rtol=5 * TOL, atol=5 * TOL)


def test_sdpa_chooses_flash_through_overrideable_on_the_gpu():
    q, k, v = (t.musa() for t in _qkv())
    with flash_attention_only(), _Ops() as ops:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(*(t.float().cpu() for t in (q, k, v)), is_causal=True)
    torch.testing.assert_close(out.float().cpu(), ref, rtol=TOL, atol=TOL)
    if ON_GPU:
        assert "aten::_scaled_dot_product_fused_attention_overrideable" in ops.names
    else:  # the host keeps the CPU's flash variant
        assert "aten::_scaled_dot_product_flash_attention_for_cpu" in ops.names
    # a mask rules flash out on both: the choice is the kernel device's, not forced
    mask = torch.ones(40, 40, dtype=torch.bool, device="musa").tril()
    with _Ops() as ops:
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert "aten::_scaled_dot_product_fused_attention_overrideable" not in ops.names


@pytest.mark.skipif(not ON_GPU, reason="dropout in fused attention: the host's flash attention has none")
def test_dropout_backward_replays_the_forward_draws():
    # out = A v for the dropped attention matrix A; backward with the same draws gives
    # grad_v = A^T g, so <g, out> == <grad_v, v>. Other draws would break the identity.
    # (through the overrideable op: its random state goes from forward to backward as two views)
    q, k, v = (t.musa().requires_grad_() for t in _qkv(s=64, d=32))
    with flash_attention_only():
        torch.musa.manual_seed(3)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        g = torch.randn_like(out)
        (grad_v,) = torch.autograd.grad(out, v, g)
        torch.testing.assert_close((g.float() * out.float()).sum(), (grad_v.float() * v.float()).sum(),
                                   rtol=2e-2, atol=1e-1)
        torch.musa.manual_seed(3)
        again = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
        assert torch.equal(again.cpu(), out.cpu())  # the musa seed decides the draws
        assert not torch.equal(F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).cpu(), out.cpu())


def test_overrideable_op_refuses_a_mask_on_the_gpu():
    q, k, v = (t.musa() for t in _qkv())
    mask = torch.zeros(40, 40, dtype=DTYPE, device="musa")
    if ON_GPU:
        with pytest.raises(RuntimeError, match="takes no attention mask"):
            OVERRIDEABLE(q, k, v, mask)
    else:  # the CPU's flash attention takes one
        ref = F.scaled_dot_product_attention(*(t.cpu() for t in (q, k, v)), attn_mask=mask.cpu())
        torch.testing.assert_close(OVERRIDEABLE(q, k, v, mask)[0].cpu(), ref, rtol=TOL, atol=TOL)
