"""torch_musa's distributed API (Moore Threads' names): parallel_fused_cross_entropy, ShardedGradScaler,
torch_musa.core.mccl. One device in process; vocabulary-parallel loss and FSDP2 with the scalers at
several ranks (tests/distributed/api_scenarios.py)."""
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from tests.distributed.launcher import assert_no_failures, free_port, run_ranks, worlds
from torch_musa.distributed.fsdp import ShardedGradScaler
from torch_musa.distributed.loss import parallel_fused_cross_entropy


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_loss_on_one_device_matches_cross_entropy(reduction, dtype):
    g = torch.Generator().manual_seed(1)
    x, t = (torch.randn(6, 33, generator=g) * 4).to(dtype), torch.randint(33, (6,), generator=g)
    t[2] = -100
    ref_x = x.float().clone().requires_grad_()
    ref = F.cross_entropy(ref_x, t, reduction=reduction)
    (ref * 3).sum().backward()
    mx = x.to("musa").detach().requires_grad_()
    loss = parallel_fused_cross_entropy(mx, t.to("musa"), reduction=reduction)
    (loss * 3).sum().backward()
    assert loss.device.type == "musa" and mx.grad.dtype == dtype
    torch.testing.assert_close(loss.cpu(), ref.detach(), rtol=1e-5, atol=1e-5)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(mx.grad.float().cpu(), ref_x.grad, **tol)


def test_loss_rejects_bad_input_naming_the_fix():
    with pytest.raises(ValueError, match="reduction"):
        parallel_fused_cross_entropy(torch.zeros(2, 3, device="musa"), torch.zeros(2, dtype=torch.long), "max")
    with pytest.raises(ValueError, match=r"view\(-1, C\)"):
        parallel_fused_cross_entropy(torch.zeros(2, 2, 3, device="musa"), torch.zeros(2, 2, dtype=torch.long))


def test_sharded_grad_scaler_scales_on_musa_and_skips_inf_steps():
    dist.init_process_group("mccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        _scale_and_skip()
    finally:
        dist.destroy_process_group()


def _scale_and_skip():
    scaler = ShardedGradScaler(init_scale=2.0)
    t = torch.full((1,), 4.0, device="musa")
    out = scaler.scale([t, (t, t)])
    assert [out[0].item(), out[1][0].item()] == [8.0, 8.0] and scaler._scale.device.type == "musa"
    p = torch.nn.Parameter(torch.ones(1, device="musa"))
    p.grad = torch.tensor([float("inf")], device="musa")
    opt = torch.optim.SGD([p], lr=1.0)
    scaler.scale(torch.ones((), device="musa"))
    assert scaler.step(opt) is None and p.item() == 1.0  # skipped
    scaler.update()
    assert scaler.get_scale() == 1.0


def test_core_mccl_is_torch_musa_mccl():
    import torch_musa.core.mccl as core_mccl

    assert core_mccl is torch.musa.mccl
    assert core_mccl.version() == torch.musa.mccl.version()


@pytest.mark.parametrize("world", worlds(2))
def test_vocab_parallel_loss_and_fsdp_grad_scalers_match_single_process(world):
    assert_no_failures(run_ranks("api", world, timeout=240, module="tests.distributed.api_scenarios"))
