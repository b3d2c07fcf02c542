#!/usr/bin/env python
"""DistributedDataParallel training of a tiny transformer LM with NCCL.

Launch:  torchrun --nproc_per_node=2 train_ddp.py --steps 10
or       python train_ddp.py --spawn 2
Without a launcher it trains in a single process.
"""
import argparse
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from common import cleanup_distributed, get_device, report, seed_everything, setup_distributed

VOCAB, SEQ = 64, 16


class TinyLM(nn.Module):
    def __init__(self, d_model: int = 32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=64, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(d_model, VOCAB)

    def forward(self, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        return self.head(self.encoder(self.embed(tokens), mask=mask, is_causal=True))


def train(rank: int, world_size: int, local_rank: int, steps: int) -> None:
    seed_everything(1234)
    device = get_device(local_rank)
    tokens = torch.randint(0, VOCAB, (steps * 8, SEQ + 1))
    dataset = TensorDataset(tokens[:, :-1], tokens[:, 1:])
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank) if world_size > 1 else None
    loader = DataLoader(dataset, batch_size=8, sampler=sampler, shuffle=sampler is None)

    model = TinyLM().to(device)
    if world_size > 1:
        model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    for step, (inp, target) in enumerate(loader):
        inp, target = inp.to(device), target.to(device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            logits = model(inp)
        loss = loss_fn(logits.float().reshape(-1, VOCAB), target.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if world_size > 1:
            dist.all_reduce(loss.detach(), op=dist.ReduceOp.AVG)
    if rank == 0:
        # Checkpoint round trip, as real scripts do for resuming.
        path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
        torch.save({"model": model.state_dict(), "step": steps}, path)
        state = torch.load(path, map_location=f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
        assert state["step"] == steps
        report("train_ddp", model, loss.item())
    if world_size > 1:
        dist.barrier()


def spawn_worker(local_rank: int, world_size: int, steps: int) -> None:
    os.environ.update(RANK=str(local_rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(world_size))
    rank, world_size, local_rank = setup_distributed()
    try:
        train(rank, world_size, local_rank, steps)
    finally:
        cleanup_distributed()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--spawn", type=int, default=0, help="start N processes with mp.spawn")
    args = parser.parse_args()
    if args.spawn:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        mp.spawn(spawn_worker, args=(args.spawn, args.steps), nprocs=args.spawn, join=True)
        return
    rank, world_size, local_rank = setup_distributed()
    try:
        train(rank, world_size, local_rank, args.steps)
    finally:
        cleanup_distributed()


if __name__ == "__main__":
    main()
