"""The worked example of docs/profiler.md: profile a few training steps on musa.

    python docs/profiler_example.py [--out trace.json] [--png trace.png]

Runs a small CNN training loop under torch.profiler with a schedule, a side stream for the
input copies, record_function ranges and memory profiling; prints the table sorted by musa
time, writes the Chrome/Perfetto trace, and (with --png) renders it with scripts/render_trace.py.
"""
import argparse
import os
import subprocess
import sys

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import torch_musa  # noqa: F401


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="musa_trace.json")
    ap.add_argument("--png")
    a = ap.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).musa()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(16, 3, 32, 32).pin_memory(), torch.randint(0, 10, (16,))) for _ in range(5)]
    copy_stream = torch.musa.Stream()

    def train_step(x_cpu, y_cpu):
        with torch.musa.stream(copy_stream), record_function("load batch"):
            x, y = x_cpu.to("musa", non_blocking=True), y_cpu.to("musa", non_blocking=True)
        torch.musa.current_stream().wait_stream(copy_stream)
        with record_function("forward"):
            loss = nn.functional.cross_entropy(model(x), y)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    traces = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], profile_memory=True,
                 record_shapes=True, schedule=schedule(wait=1, warmup=1, active=3),
                 on_trace_ready=lambda p: (p.export_chrome_trace(a.out), traces.append(a.out))) as prof:
        for x, y in batches:
            train_step(x, y)
            prof.step()
        torch.musa.synchronize()
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12))
    print(f"trace: {traces[-1]}")
    if a.png:
        render = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "render_trace.py")
        subprocess.run([sys.executable, render, a.out, a.png], check=True)
        print(f"picture: {a.png}")


if __name__ == "__main__":
    main()
