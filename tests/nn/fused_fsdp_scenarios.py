"""Rank-side code of the FSDP2 test of tests/nn/test_fused_llama.py: the fused Llama-style model,
each block and the root fully_shard-ed over all ranks, trains on each rank's own batches with
the same losses as the unfused model in one process on the whole batch (losses all-reduced)."""
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
    dist.destroy_process_group()


if __name__ == "__main__":
    import sys

    globals()[f"scenario_{sys.argv[1]}"]()
    write()
