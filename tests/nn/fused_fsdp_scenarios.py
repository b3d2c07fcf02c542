"""Rank-side code of the FSDP2 test of tests/nn/test_fused_llama.py: the fused Llama-style model,
each block and the root fully_shard-ed over all ranks, trains on each rank's own batches with
the same losses as the unfused model in one process on the whole batch (losses all-reduced).
Then F.rms_norm on a row-sharded DTensor: the fused op runs on each shard (its sharding rules),
the output stays sharded, and output and gradients equal the whole tensor's on one rank."""
import os

import torch
import torch.distributed as dist

from tests.distributed.scenarios import RANK, WORLD, dev, failures, init, write  # noqa: F401
from tests.nn import fused_llama


def scenario_fsdp_fused_llama():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    init(device_id=torch.device("musa", int(os.environ.get("LOCAL_RANK", 0))))
    mesh = init_device_mesh("musa", (WORLD,))
    fused, unfused = fused_llama.pair(dev())
    data = fused_llama.batches(3, batch=2 * WORLD)
    ref = fused_llama.train(unfused, data, dev())
    for blk in fused.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(fused, mesh=mesh)

    def step(tok, tgt):  # this rank's rows; the mean over ranks is the whole batch's loss
        return fused(tok[RANK * 2:(RANK + 1) * 2], tgt[RANK * 2:(RANK + 1) * 2])

    opt = torch.optim.AdamW(fused.parameters(), lr=1e-2)
    got = []
    for tok, tgt in data:
        loss = step(tok.to(dev()), tgt.to(dev()))
        loss.backward()
        opt.step()
        opt.zero_grad()
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        got.append(avg.item() / WORLD)
    if not torch.allclose(torch.tensor(got), torch.tensor(ref), rtol=1e-4, atol=1e-5):
        failures.append(f"FSDP2 fused losses {got} != unfused {ref}")
    check_dtensor_rms_norm(mesh)
    dist.destroy_process_group()


def check_dtensor_rms_norm(mesh):
    import torch.nn.functional as F
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    torch.manual_seed(3)
    x, w, g = torch.randn(4 * WORLD, 3, 16), torch.randn(16), torch.randn(4 * WORLD, 3, 16)
    xr, wr = x.to(dev()).requires_grad_(), w.to(dev()).requires_grad_()
    F.rms_norm(xr, (16,), wr, 1e-6).backward(g.to(dev()))
    xd = distribute_tensor(x.to(dev()), mesh, [Shard(0)]).requires_grad_()
    wd = distribute_tensor(w.to(dev()), mesh, [Replicate()]).requires_grad_()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        y = F.rms_norm(xd, (16,), wd, 1e-6)
        y.backward(distribute_tensor(g.to(dev()), mesh, [Shard(0)]))
    ran = {e.key for e in prof.key_averages()}
    if not {"musa_fused::_fused_rmsnorm_forward", "musa_fused::_fused_rmsnorm_backward"} <= ran:
        failures.append(f"DTensor rms_norm did not run the fused ops: {sorted(k for k in ran if 'rms' in k)}")
    if y.placements != (Shard(0),):
        failures.append(f"DTensor rms_norm output placements {y.placements}, expected (Shard(0),)")
    for name, got, want in (("output", y.full_tensor(), F.rms_norm(xr, (16,), wr, 1e-6)),
                            ("input grad", xd.grad.full_tensor(), xr.grad),
                            ("weight grad", wd.grad.full_tensor(), wr.grad)):
        if not torch.allclose(got.cpu(), want.detach().cpu(), rtol=1e-4, atol=1e-5):
            failures.append(f"DTensor rms_norm {name} differs by {(got.cpu() - want.detach().cpu()).abs().max()}")


if __name__ == "__main__":
    import sys

    globals()[f"scenario_{sys.argv[1]}"]()
    write()
