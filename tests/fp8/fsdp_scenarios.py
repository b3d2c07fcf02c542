"""Rank-side code of the FP8 FSDP2 test: `python -m tests.fp8.fsdp_scenarios fsdp_float8`.

The same float8-recipe model trains three ways under FSDP2 with bf16 mixed precision: bf16
all-gather (the reference), FP8 all-gather with the amax all-reduced per weight, and FP8
all-gather with scales precomputed after each optimizer step. With one scale per whole weight
the FP8 paths cast the same weights (from the fp32 shard rather than the bf16-gathered copy, so
a few values round differently); losses and weights agree to that rounding, under SGD, which
passes gradient differences on in proportion (AdamW's normalized steps would amplify them).
mccl's byte counts show what each all-gather moved.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.distributed.scenarios import RANK, WORLD, dev, extra, failures, init, write  # noqa: F401
from torch_musa import fp8


class MLP(nn.Module):
    # No biases: every all-gathered parameter is a converted weight, so FP8 halves all of it.
    def __init__(self, d=64):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, 4 * d, bias=False),
                                        nn.Linear(4 * d, d, bias=False))

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


def close(name, got, expected, rtol=0.0, atol=0.0):
    got, expected = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(expected, dtype=torch.float64)
    if not torch.allclose(got, expected, rtol=rtol, atol=atol):
        failures.append(f"{name}: max difference {(got - expected).abs().max().item():.3g}")


def run(all_gather: str, param_dtype, steps=4):
    import torch_musa
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh("musa", (WORLD,))
    torch.manual_seed(0)
    model = MLP().to(dev())
    cfg = fp8.Float8LinearConfig(enable_fsdp_float8_all_gather=all_gather.startswith("fp8"))
    fp8.convert_to_float8_training(model, config=cfg)
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for m in (model.fc1, model.fc2, model.fc3):
        fully_shard(m, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(100 + RANK)
    losses, gathered = [], []
    for _ in range(steps):
        x, y = torch.randn(32, 64, generator=g), torch.randn(32, 64, generator=g)
        torch_musa.mccl.reset_collective_bytes()
        loss = F.mse_loss(model(x.to(dev())).float(), y.to(dev()))
        loss.backward()
        stats = torch_musa.mccl.collective_bytes()
        gathered.append(sum(v["bytes"] for k, v in stats.items() if "gather" in k))
        opt.step()
        opt.zero_grad()
        if all_gather == "fp8 precomputed":
            fp8.precompute_float8_dynamic_scale_for_fsdp(model)
        losses.append(loss.item())
    weights = {n: p.full_tensor().detach().cpu().float() for n, p in model.named_parameters()}
    return losses, gathered, weights, sum(p.numel() for p in model.parameters())


def scenario_fsdp_float8():
    init(device_id=torch.device("musa", int(os.environ.get("LOCAL_RANK", 0))))
    ref_losses, bf16_bytes, ref_w, numel = run("bf16", torch.bfloat16)
    # bf16: two bytes per element of this rank's shard per all-gather (forward, and backward's re-gather)
    close("bf16 all-gather bytes are 2 per element", bf16_bytes[0] % (2 * numel // WORLD), 0)
    extra["bytes"] = {"bf16": bf16_bytes}
    extra["losses"] = {"bf16": ref_losses}
    for variant in ("fp8", "fp8 precomputed"):
        losses, gathered, weights, _ = run(variant, torch.bfloat16)
        extra["bytes"][variant], extra["losses"][variant] = gathered, losses
        close(f"{variant} losses", losses, ref_losses, rtol=2e-2, atol=1e-3)
        for n, w in weights.items():
            rel = ((w - ref_w[n]).norm() / ref_w[n].norm()).item()
            extra.setdefault("weight_rel_diff", {})[f"{variant} {n}"] = rel
            close(f"{variant} final {n} (relative norm difference)", rel, 0.0, atol=1e-2)
        close(f"{variant}: all-gather bytes are half of bf16's", [2 * b for b in gathered], bf16_bytes)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    import sys

    globals()[f"scenario_{sys.argv[1]}"]()
    write()
