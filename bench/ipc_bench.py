"""Hand-off latency of a tensor sent to another process through a torch.multiprocessing queue:
musa (IPC over the same memory) against the native device in the same run.

    python bench/ipc_bench.py [--rounds 3] [--sends 20]

The native side is cuda (CUDA IPC) when a GPU is present, else CPU tensors already in shared
memory (torch's file-descriptor sharing). Each side runs in fresh child processes, alternating
round by round; the native one never loads torch_musa (pytorch/pytorch#161129). A hand-off is
put() in the sender until the receiver holds the tensor (its get() returned) and said so; the
receiver then drops it. No copy is made, so the latency does not grow with the size.
Prints native and musa medians (ms) and native / musa (>= 1.0: musa at least as fast).
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sides import run_side  # noqa: E402

SIZES_MIB = [1, 256]


def _receiver(inbox, acks):
    while True:
        t = inbox.get()
        if t is None:
            return
        acks.put(t.numel())
        del t


def _side(device, sends):
    import torch
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    inbox, acks = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_receiver, args=(inbox, acks))
    p.start()
    out = {}
    for mib in SIZES_MIB:
        t = torch.ones(mib << 18, device=device)  # float32
        if device == "cpu":
            t.share_memory_()
        if device != "cpu":
            getattr(torch, device).synchronize()
        times = []
        for i in range(sends + 3):
            start = time.perf_counter()
            inbox.put(t)
            assert acks.get() == t.numel()
            if i >= 3:  # warm-up: first opens and the receiver's start-up
                times.append((time.perf_counter() - start) * 1e3)
        out[mib] = statistics.median(times)
    inbox.put(None)
    p.join()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sends", type=int, default=20)
    ap.add_argument("--side", choices=["native", "musa"])
    ap.add_argument("--native-device")
    args = ap.parse_args()
    if args.side:
        device = args.native_device if args.side == "native" else "musa"
        print(json.dumps(_side(device, args.sends)))
        return

    import torch

    native = "cuda" if torch.cuda.is_available() else "cpu"
    results = {"native": [], "musa": []}
    for _ in range(args.rounds):
        for side in ("native", "musa"):
            results[side].append(run_side(__file__, side, ["--native-device", native, "--sends", str(args.sends)],
                                          timeout=600))
    driver = torch.musa.get_driver_name()
    print(f"IPC hand-off latency (ms, median of {args.sends} sends, median of {args.rounds} rounds); "
          f"native = {native}, musa driver = {driver}")
    print(f"| size | native {native} | musa | native / musa |")
    print("| --- | --- | --- | --- |")
    for mib in SIZES_MIB:
        n = statistics.median(r[str(mib)] for r in results["native"])
        m = statistics.median(r[str(mib)] for r in results["musa"])
        print(f"| {mib} MiB | {n:.3f} | {m:.3f} | {n / m:.2f} |")


if __name__ == "__main__":
    main()
