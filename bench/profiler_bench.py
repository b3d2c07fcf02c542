"""What torch.profiler costs a training step on musa, next to what it costs natively.

    python bench/profiler_bench.py [--rounds N] [--quick]

A GPT training step (the GPU benchmark's model; a small one on the host driver) is timed with
no profiler and inside torch.profiler.profile(activities=[CPU, PrivateUse1]) recording every
op. The native reference is the same script on the kernel device (CPU with the CPU profiler on
the host driver; cuda with [CPU, CUDA], CUPTI, on the GPU) in processes that never import
torch_musa. Every round is a fresh process per cell, cells alternate, and the table reports
medians. Floor (issue 14): musa profiled/unprofiled <= 1.3.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def child(device, profiled, quick):
    if device != "musa":
        sys.modules["torch_musa"] = None  # the native run never sees torch_musa
    import torch
    import torch.nn as nn
    from torch.profiler import ProfilerActivity, profile
    sys.path.insert(0, HERE)
    from gpu_bench import GPT
    from host_bench import median_time, sync

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

    steps = 4 if quick else 8
    activities = [ProfilerActivity.CPU]
    if device == "musa":
        activities.append(ProfilerActivity.PrivateUse1)
    elif device == "cuda":
        activities.append(ProfilerActivity.CUDA)
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


def run_cell(device, profiled, quick):
    env = dict(os.environ)
    if device != "musa":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    args = [sys.executable, __file__, "--child", device, "--profiled", str(int(profiled))] + (["--quick"] if quick else [])
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{device} profiled={profiled} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child")
    ap.add_argument("--profiled", type=int, default=0)
    a = ap.parse_args()
    if a.child:
        return child(a.child, bool(a.profiled), a.quick)

    import torch
    import torch_musa  # noqa: F401
    native = "cpu" if torch.musa.get_driver_name() == "host" else "cuda"
    driver = torch.musa.get_driver_name()
    cells = {(d, p): [] for d in ("musa", native) for p in (False, True)}
    events = {}
    for _ in range(a.rounds):
        for (d, p) in cells:
            r = run_cell(d, p, a.quick)
            cells[(d, p)].append(r["ms"])
            if p:
                events[d] = r["device_events"]
    med = {k: statistics.median(v) for k, v in cells.items()}
    print(f"\nprofiler cost, GPT training step, musa driver '{driver}' vs native {native} "
          f"({a.rounds} rounds, medians, fresh process per cell)")
    print(f"| {'device':8} | {'step ms':>9} | {'profiled ms':>11} | {'profiled/plain':>14} | {'device events':>13} |")
    print(f"| {'-' * 8} | {'-' * 9} | {'-' * 11} | {'-' * 14} | {'-' * 13} |")
    for d in ("musa", native):
        ratio = med[(d, True)] / med[(d, False)]
        print(f"| {d:8} | {med[(d, False)]:9.2f} | {med[(d, True)]:11.2f} | {ratio:14.3f} | {events.get(d, 0):13d} |")
    ratio = med[("musa", True)] / med[("musa", False)]
    print(f"musa profiled/plain {ratio:.3f} (floor <= 1.3): {'PASS' if ratio <= 1.3 else 'FAIL'}")


if __name__ == "__main__":
    main()
