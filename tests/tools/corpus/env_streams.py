#!/usr/bin/env python
"""CUDA environment variables, device queries, streams/events and bf16 autocast.

Pins the job to one GPU with CUDA_VISIBLE_DEVICES before CUDA is initialised,
then overlaps a host-to-device copy with compute on a side stream.
"""
import argparse
import os

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")
os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "0")
os.environ.setdefault("NCCL_DEBUG", "WARN")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def describe_gpus():
    assert torch.cuda.is_available(), "this script needs a CUDA GPU"
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        print(f"cuda:{i} {torch.cuda.get_device_name(i)} {props.total_memory / 2**30:.1f} GiB "
              f"capability={torch.cuda.get_device_capability(i)}")
    print(f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']} current={torch.cuda.current_device()}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    describe_gpus()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.deterministic = True
    torch.cuda.manual_seed(0)
    torch.manual_seed(0)

    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 4)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=False)
    copy_stream = torch.cuda.Stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    host_batches = [torch.randn(16, 32).pin_memory() for _ in range(args.steps)]
    target = torch.randn(16, 4, device="cuda")
    with torch.cuda.stream(copy_stream):
        next_batch = host_batches[0].to("cuda", non_blocking=True)
    start.record()
    for step in range(args.steps):
        torch.cuda.current_stream().wait_stream(copy_stream)
        batch = next_batch
        batch.record_stream(torch.cuda.current_stream())
        if step + 1 < args.steps:
            with torch.cuda.stream(copy_stream):
                next_batch = host_batches[step + 1].to("cuda", non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(batch)
        loss = nn.functional.mse_loss(out.float(), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    end.record()
    torch.cuda.synchronize()
    print(f"{args.steps} steps in {start.elapsed_time(end):.2f} ms; "
          f"allocated={torch.cuda.memory_allocated()} reserved={torch.cuda.memory_reserved()}")
    torch.cuda.empty_cache()
    assert batch.is_cuda and out.dtype == torch.bfloat16
    param = next(model.parameters())
    print(f"[env_streams] OK device={param.device} is_cuda={param.is_cuda} loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
