"""What torch.profiler costs a training step on musa, next to what it costs natively.

    python bench/profiler_bench.py [--rounds N] [--size realistic|launch|both]

A GPT training step (the GPU benchmark's model; a small one on the host driver) is timed with
no profiler and inside torch.profiler.profile(activities=[CPU, PrivateUse1], profile_memory=True,
record_shapes=True) recording every op. The native reference is the same script on the kernel
device (CPU with the CPU profiler on the host driver; cuda with [CPU, CUDA], CUPTI, on the GPU)
with the same settings, in processes that never import torch_musa. Two sizes: realistic, and
launch-bound (per-op costs dominate: the profiler's worst case). Every cell of every round is a
fresh process, the cells' order reverses every other round, and the table reports medians.
Floor (issue 28): at each size, musa's slowdown (profiled / plain) <= 1.1x native's slowdown.

On the host driver both devices run ATen's CPU kernels; the children use --threads intra-op
threads (default 1): with OpenMP's threads on every core, a machine shared with other work gave
bimodal native steps (280 vs 1850 ms for the same cell), which no median of 3 survives.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def training_step(device, quick):
    """The GPT training step both profiler benchmarks time: (torch, step, device activity).
    The native run (device != musa) never sees torch_musa."""
    if device != "musa":
        sys.modules["torch_musa"] = None
    import torch
    import torch.nn as nn
    from torch.profiler import ProfilerActivity
    sys.path.insert(0, HERE)
    from gpu_bench import GPT

    gpu = device == "cuda" or (device == "musa" and torch.musa.get_driver_name() != "host")
    if gpu and not quick:
        cfg, batch, seq = dict(vocab=8192, d=768, h=12, layers=6, seq=512), 16, 512
    elif gpu:
        cfg, batch, seq = dict(vocab=8192, d=512, h=8, layers=4, seq=256), 8, 256
    elif not quick:
        cfg, batch, seq = dict(vocab=4096, d=256, h=8, layers=4, seq=128), 8, 128
    else:  # launch-bound: per-op costs dominate, the profiler's worst case
        cfg, batch, seq = dict(vocab=2048, d=128, h=4, layers=2, seq=64), 4, 64
    torch.manual_seed(0)
    model = GPT(**cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, cfg["vocab"], (batch, seq + 1), device=device)

    def step():
        logits = model(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), data[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    device_activity = {"musa": ProfilerActivity.PrivateUse1, "cuda": ProfilerActivity.CUDA}.get(device)
    return torch, step, device_activity


def child(device, profiled, quick):
    torch, step, device_activity = training_step(device, quick)
    from torch.profiler import ProfilerActivity, profile
    from host_bench import median_time, sync

    steps = 12 if quick else 8
    activities = [ProfilerActivity.CPU] + ([device_activity] if device_activity else [])
    for _ in range(3):
        step()
    sync(device)

    def timed():
        return median_time(step, device, steps, warmup=0)

    if profiled:
        with profile(activities=activities, profile_memory=True, record_shapes=True) as prof:
            ms = timed() * 1e3
        n_device = sum(1 for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU)
    else:
        ms, n_device = timed() * 1e3, 0
    print(json.dumps({"ms": ms, "device_events": n_device}))


THREADS = None  # intra-op threads of the host-driver children (main() sets it)


def run_cell(device, profiled, quick):
    env = dict(os.environ)
    if THREADS and device in ("musa", "cpu"):
        env["OMP_NUM_THREADS"] = str(THREADS)
    if device != "musa":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    args = [sys.executable, __file__, "--child", device, "--profiled", str(int(profiled))] + (["--quick"] if quick else [])
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{device} profiled={profiled} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


FLOOR = 1.1  # musa's slowdown / native's slowdown, at each size (issue 28)


def measure(native, quick, rounds):
    """Medians (ms) per (device, profiled) over `rounds`, each cell a fresh process; the cells'
    order reverses every other round so neither device always runs first."""
    order = [(d, p) for d in ("musa", native) for p in (False, True)]
    cells = {k: [] for k in order}
    events = {}
    for i in range(rounds):
        for (d, p) in (order if i % 2 == 0 else order[::-1]):
            r = run_cell(d, p, quick)
            cells[(d, p)].append(r["ms"])
            if p:
                events[d] = r["device_events"]
    return {k: statistics.median(v) for k, v in cells.items()}, events


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", choices=("realistic", "launch", "both"), default="both")
    ap.add_argument("--quick", action="store_true", help="the launch-bound size only (--size launch)")
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads of each child on the host driver (0: torch's default)")
    ap.add_argument("--child")
    ap.add_argument("--profiled", type=int, default=0)
    a = ap.parse_args()
    if a.child:
        return child(a.child, bool(a.profiled), a.quick)
    if a.quick:
        a.size = "launch"

    import torch
    import torch_musa  # noqa: F401
    native = "cpu" if torch.musa.get_driver_name() == "host" else "cuda"
    driver = torch.musa.get_driver_name()
    global THREADS
    THREADS = a.threads if native == "cpu" else None
    sizes = {"realistic": [False], "launch": [True], "both": [False, True]}[a.size]
    rows = []
    for quick in sizes:
        med, events = measure(native, quick, a.rounds)
        rows.append(("launch-bound" if quick else "realistic", med, events))
    print(f"\nprofiler cost, GPT training step, musa driver '{driver}' vs native {native} "
          f"({a.rounds} rounds, medians, fresh process per cell, alternating order"
          f"{f', {THREADS} intra-op thread(s)' if THREADS else ''})")
    print(f"| {'size':12} | {'device':6} | {'step ms':>9} | {'profiled ms':>11} | {'profiled/plain':>14} | "
          f"{'device events':>13} |")
    print(f"| {'-' * 12} | {'-' * 6} | {'-' * 9} | {'-' * 11} | {'-' * 14} | {'-' * 13} |")
    verdicts = []
    for size, med, events in rows:
        for d in ("musa", native):
            ratio = med[(d, True)] / med[(d, False)]
            print(f"| {size:12} | {d:6} | {med[(d, False)]:9.2f} | {med[(d, True)]:11.2f} | {ratio:14.3f} | "
                  f"{events.get(d, 0):13d} |")
        rel = (med[("musa", True)] / med[("musa", False)]) / (med[(native, True)] / med[(native, False)])
        verdicts.append(f"{size}: musa slowdown / {native} slowdown {rel:.3f} (floor <= {FLOOR}): "
                        f"{'PASS' if rel <= FLOOR else 'FAIL'}")
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
