"""Rank-side code of tests/distributed/test_api.py: `python -m tests.distributed.api_scenarios api`.

torch_musa's own distributed API (Moore Threads' names) in rank processes, with the helpers and the
result file of tests/distributed/scenarios.py.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

from tests.distributed import scenarios
from tests.distributed.scenarios import RANK, WORLD, Net, batches, check, dev, failures, init, local


def scenario_api():
    """parallel_fused_cross_entropy over vocabulary-sharded logits against F.cross_entropy on the whole
    logits, and FSDP2 training with ShardedGradScaler / torch.amp.GradScaler("musa") against
    single-process SGD, an overflow on one rank skipping the step on every rank."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    from torch_musa.distributed.fsdp import ShardedGradScaler
    from torch_musa.distributed.loss import parallel_fused_cross_entropy

    init(device_id=torch.device("musa", int(os.environ.get("LOCAL_RANK", 0))))
    d, mesh = dev(), init_device_mesh("musa", (WORLD,))
    g = torch.Generator().manual_seed(0)  # the same logits on every rank
    for n, c in ((4, 16), (5, 7)):  # 7 classes split unevenly
        for reduction in ("mean", "sum", "none"):
            x, t = torch.randn(n, c, generator=g) * 3, torch.randint(c, (n,), generator=g)
            t[1] = -100  # ignored, as F.cross_entropy does
            upstream = torch.rand(n, generator=g) if reduction == "none" else torch.tensor(2.5)
            ref_x = x.clone().requires_grad_()
            ref = nn.functional.cross_entropy(ref_x, t, reduction=reduction)
            (ref * upstream).sum().backward()
            dx = distribute_tensor(x.to(d), mesh, [Shard(1)]).requires_grad_()
            loss = parallel_fused_cross_entropy(dx, t.to(d), reduction=reduction, pg=mesh.get_group())
            loss.backward(distribute_tensor(upstream.to(d), mesh, [Replicate()]))
            name = f"parallel_fused_cross_entropy {n}x{c} {reduction}"
            check(f"{name} loss", loss.full_tensor(), ref.detach(), rtol=1e-5, atol=1e-6)
            check(f"{name} grad", dx.grad.full_tensor(), ref_x.grad, rtol=1e-5, atol=1e-6)
            if dx.grad.placements != (Shard(1),):
                failures.append(f"{name}: gradient placed {dx.grad.placements}")

    data, skipped = batches(3), 1
    torch.manual_seed(0)
    ref_model = Net()
    opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(data):
        nn.functional.mse_loss(ref_model(x), y).backward()
        if i != skipped:
            opt.step()
        opt.zero_grad()
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    def fsdp2():
        model = Net().to(d)
        for m in (model.fc1, model.fc2, model):
            fully_shard(m, mesh=mesh)
        return model

    def full_fc1(model):
        if isinstance(model, FSDP):
            with FSDP.summon_full_params(model):
                return model.module.fc1.weight.detach().clone()
        return model.fc1.weight.full_tensor().detach()

    variants = {"FSDP2 ShardedGradScaler": (fsdp2, lambda: ShardedGradScaler(init_scale=2.0 ** 10)),
                "FSDP2 torch.amp.GradScaler('musa')": (fsdp2, lambda: torch.amp.GradScaler("musa", init_scale=2.0 ** 10)),
                "FSDP1 ShardedGradScaler": (lambda: FSDP(Net(), device_id=d, use_orig_params=True),
                                            lambda: ShardedGradScaler(init_scale=2.0 ** 10))}
    for name, (make_model, make_scaler) in variants.items():
        torch.manual_seed(0)
        model = make_model()
        opt, scaler = torch.optim.SGD(model.parameters(), lr=0.1), make_scaler()
        for i, (x, y) in enumerate(data):
            scaler.scale(nn.functional.mse_loss(model(local(x)), local(y))).backward()
            if i == skipped and RANK == 0:  # an overflow on one rank only
                grad = next(p.grad for p in model.parameters() if p.grad is not None and p.grad.numel())
                (grad.to_local() if hasattr(grad, "to_local") else grad).view(-1)[0] = float("inf")
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
        if scaler.get_scale() != 2.0 ** 9:
            failures.append(f"{name}: scale {scaler.get_scale()} after one overflow, expected {2.0 ** 9}")
        check(f"{name} final fc1.weight", full_fc1(model), ref_model.fc1.weight.detach(), rtol=1e-5, atol=1e-6)
    dist.destroy_process_group()


if __name__ == "__main__":
    globals()[f"scenario_{sys.argv[1]}"]()
    scenarios.write()
