"""Shared helpers for the CUDA training scripts in this folder.

Typical of what real projects keep in ``utils/dist.py``: device selection,
seeding and NCCL process-group setup for torchrun launches.
"""
import os
import random

import torch
import torch.distributed as dist


def get_device(local_rank: int = 0) -> torch.device:
    """The CUDA device for this process (falls back to CPU without a GPU)."""
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        return torch.device(f"cuda:{local_rank}")
    return torch.device("cpu")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)  # no-op without CUDA


def setup_distributed():
    """Initialise NCCL when launched by torchrun; (rank, world_size, local_rank)."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return 0, 1, 0
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    os.environ.setdefault("NCCL_DEBUG", "WARN")
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend, init_method="env://")
    return rank, world_size, local_rank


def cleanup_distributed() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def report(tag: str, model: torch.nn.Module, loss: float) -> None:
    param = next(model.parameters())
    print(f"[{tag}] OK device={param.device} is_cuda={param.is_cuda} loss={loss:.4f}", flush=True)
