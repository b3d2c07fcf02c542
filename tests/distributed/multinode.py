"""Worker of test_multinode.py, launched by torchrun (`-m tests.distributed.multinode OUT_DIR`) on each
simulated node: DDP, then FSDP2 (fully_shard) and HSDP over mccl across every node's ranks, each against
single-process training on the full batch. Writes {"failures": [...], ...} to OUT_DIR/RANK.json.

It uses scenarios.py's model, data, reference and checks (RANK and WORLD_SIZE come from torchrun).
"""
import json
import os
import sys

import torch
import torch.distributed as dist

from tests.distributed import scenarios as S

LOCAL_RANK = int(os.environ["LOCAL_RANK"])
LOCAL_WORLD = int(os.environ["LOCAL_WORLD_SIZE"])


def check_params(name, model, ref_model, full=lambda p: p):
    """Every final parameter against the single-process model's (`full` gathers a sharded one)."""
    for (n, p), (_, r) in zip(model.named_parameters(), ref_model.named_parameters()):
        S.check(f"{name} final {n}", full(p.detach()), r.detach(), rtol=1e-5, atol=1e-6)


def main():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    count = torch.musa.device_count()
    if count < LOCAL_WORLD:  # one device per local rank, as one GPU per rank
        raise RuntimeError(f"{LOCAL_WORLD} ranks per node need {LOCAL_WORLD} musa devices but {count} are there: "
                           f"set TORCH_MUSA_HOST_DEVICES={LOCAL_WORLD} (host driver) or lower --nproc-per-node")
    S.init(device_id=torch.device("musa", LOCAL_RANK))
    S.extra.update(device=S.dev().index, node=int(os.environ["GROUP_RANK"]), world=S.WORLD)
    data = S.batches(3)
    ref_losses, ref_model = S.reference_losses(S.Net, data)
    bound = lambda r: 1e-5 * max(1.0, abs(r))  # noqa: E731 - float reduction order only

    torch.manual_seed(0)
    model = DDP(S.Net().to(S.dev()), device_ids=[LOCAL_RANK])
    S.train_like_reference("ddp", model, data, ref_losses, bound)
    check_params("ddp", model.module, ref_model)

    # FSDP2 sharded over the whole world, then HSDP: replicated across nodes, sharded within one
    nodes = S.WORLD // LOCAL_WORLD
    meshes = {"fsdp2": init_device_mesh("musa", (S.WORLD,)),
              "hsdp": init_device_mesh("musa", (nodes, LOCAL_WORLD), mesh_dim_names=("node", "local"))}
    for name, mesh in meshes.items():
        torch.manual_seed(0)
        model = S.Net().to(S.dev())
        for m in (model.fc1, model.fc2, model):
            fully_shard(m, mesh=mesh)
        S.extra[f"{name} placements"] = str(model.fc1.weight.placements)
        S.train_like_reference(name, model, data, ref_losses, bound)
        check_params(name, model, ref_model, full=lambda p: p.full_tensor())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    with open(os.path.join(sys.argv[1], f"{S.RANK}.json"), "w") as f:
        json.dump({"failures": S.failures, **S.extra}, f)
