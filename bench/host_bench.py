"""musa on the host driver vs native CPU torch, side by side in one run.

    python bench/host_bench.py [--rounds 3] [--paired 15]

The host driver runs ATen's CPU kernels on musa memory, so the native CPU is
the reference: ratios show what the musa layer costs (>= 1.0 means musa is at
least as fast; latency rows report native/musa, throughput rows musa/native).
--paired N alternates single cpu and musa calls (N times a row's iterations) and
reports the median of the per-pair ratios, which a machine shared with other
work (whose speed wanders between the two sides of one round) disturbs far less.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def sync(device):
    if device == "musa":
        torch.musa.synchronize()
    elif device == "cuda":
        torch.cuda.synchronize()


def median_time(fn, device, iters, warmup=3, reps=1):
    """Median over `iters` of (reps calls, then one synchronize) / reps, in seconds."""
    for _ in range(warmup):
        fn()
    sync(device)
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync(device)
        samples.append((time.perf_counter() - t0) / reps)
    return statistics.median(samples)


# Each case builds its work on `device` and returns (one call, how much work a call does, warm-up calls).
def small_ops(device, n_ops=200):
    x = torch.randn(256, device=device)

    def chain():
        y = x
        for _ in range(n_ops // 4):
            y = y * 1.0001
            y = y + 0.0001
            y = torch.relu(y)
            y = y.sub(0.00001)
        return y
    return chain, n_ops / 1e6, 3  # us/op (seconds per op, scaled)


def matmul(device, n=1024):
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    return (lambda: a @ b), 2 * n**3 / 1e9, 3  # GFLOP/s


def conv(device):
    x = torch.randn(8, 64, 56, 56, device=device)
    c = nn.Conv2d(64, 64, 3, padding=1).to(device)

    def run():
        with torch.no_grad():
            c(x)
    return run, 2 * 8 * 64 * 64 * 9 * 56 * 56 / 1e9, 3  # GFLOP/s


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def cnn_step(device):
    torch.manual_seed(0)
    model = SmallCNN().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 3, 32, 32, device=device), torch.randint(0, 10, (64,), device=device)

    def step():
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    # More warm-up than the other rows: the first steps fault in fresh pages
    # (musa segments, the CPU's malloc arenas) and are not steady state.
    return step, 64, 6  # images/s


ROWS = [  # name, unit, case, iterations per measurement, higher is better, goal (ratio floor: issue #57's)
    ("small elementwise ops", "us/op", small_ops, 30, False, 1 / 1.1),
    ("matmul 1024^2 fp32", "GFLOP/s", matmul, 10, True, 0.97),
    ("conv 3x3 64ch 56x56 b8", "GFLOP/s", conv, 5, True, 0.97),
    ("CNN training step b64", "img/s", cnn_step, 10, True, 0.97),
]


def rate(work, seconds, higher):
    return work / seconds if higher else seconds / work


def rounds(case, iters, higher, n):
    """Best of n alternating cpu/musa measurements (each the median of `iters` calls)."""
    vals = {"cpu": [], "musa": []}
    for _ in range(n):  # interleave so machine noise hits both sides
        for device in vals:
            fn, work, warmup = case(device)
            vals[device].append(rate(work, median_time(fn, device, iters, warmup), higher))
    pick = max if higher else min
    return pick(vals["cpu"]), pick(vals["musa"]), None


def paired(case, higher, n):
    """Single cpu and musa calls alternated n times: medians, and the median of per-pair ratios."""
    cases = {device: case(device) for device in ("cpu", "musa")}
    for device, (fn, _, warmup) in cases.items():
        for _ in range(warmup):
            fn()
        sync(device)
    times = {"cpu": [], "musa": []}
    for _ in range(n):
        for device, (fn, _, _) in cases.items():
            t0 = time.perf_counter()
            fn()
            sync(device)
            times[device].append(time.perf_counter() - t0)
    work = cases["cpu"][1]
    ratios = [c / m for c, m in zip(times["cpu"], times["musa"])]  # musa speed over cpu speed
    return (rate(work, statistics.median(times["cpu"]), higher), rate(work, statistics.median(times["musa"]), higher),
            statistics.median(ratios))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="alternating cpu/musa rounds; best of each is kept")
    ap.add_argument("--paired", type=int, default=0, help="median of this many paired single-call ratios instead")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, musa driver {torch.musa.get_driver_name()}, {torch.get_num_threads()} threads")
    print(f"\n{'benchmark':<26}{'unit':>9}{'native cpu':>12}{'musa':>12}{'ratio':>8}{'goal':>8}")
    for name, unit, case, iters, higher, goal in ROWS:
        if args.paired:
            native, musa, ratio = paired(case, higher, args.paired * iters)
        else:
            native, musa, _ = rounds(case, iters, higher, args.rounds)
            ratio = musa / native if higher else native / musa
        print(f"{name:<26}{unit:>9}{native:>12.4g}{musa:>12.4g}{ratio:>8.3f}{'>=' + format(goal, '.2f'):>8}")


if __name__ == "__main__":
    main()
