"""Per-op CPU overhead of musa against the native device, split by op shape.

    python3 bench/op_overhead.py [--n 2000] [--rounds 5]
    python3 bench/op_overhead.py --paired [--pairs 300] [--chunk 200] [--only 'empty(256),y * z']

Each row times a chain of tiny ops (256 floats, so kernels cost nothing and
the CPU path is all that is measured) and prints us/op for the native device
(CPU on the host driver, CUDA on the cuda driver) and for musa, and their
difference. The rows separate the costs: an in-place op allocates nothing;
an out-of-place one adds an output allocation; `empty` is the factory alone.

--paired compares builds on a machine whose CPU speed wanders (this one's is
bimodal): it alternates short chunks of the native op and the musa op and
prints the median of the per-pair ratios, musa over native, which does not
depend on the speed the CPU happened to run at.
"""
import argparse
import statistics
import sys
import time

import torch
import torch_musa  # noqa: F401


def chain_us(fn, sync, n, rounds):
    fn(50)
    sync()
    best = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(n)
        sync()
        best.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(best)


def variants(dev):
    x = torch.randn(256, device=dev)
    z = torch.randn(256, device=dev)

    def mul_scalar(n):
        y = x
        for _ in range(n):
            y = y * 1.0001

    def mul_tensor(n):
        y = x
        for _ in range(n):
            y = y * z

    def mul_inplace(n):
        y = x.clone()
        for _ in range(n):
            y.mul_(1.0001)

    def add_out(n):
        out = torch.empty_like(x)
        for _ in range(n):
            torch.add(x, z, out=out)

    def chain(expr):
        def run(n):
            for _ in range(n):
                expr()
        return run

    m = torch.randn(16, 16, device=dev)
    idx = torch.arange(0, 256, 4, device=dev)
    c = x > 0
    bias = torch.randn(16, device=dev)
    b3 = torch.randn(4, 8, 8, device=dev)

    def empty(n):
        for _ in range(n):
            torch.empty(256, device=dev)

    def view(n):
        for _ in range(n):
            x.view(16, 16)

    return [("y * 1.0001", mul_scalar), ("y * z", mul_tensor), ("y.mul_(1.0001)", mul_inplace),
            ("add(x, z, out=)", add_out), ("x - z", chain(lambda: x - z)), ("x / z", chain(lambda: x / z)),
            ("x.sum()", chain(lambda: x.sum())), ("m.sum(1)", chain(lambda: m.sum(1))),
            ("x.mean()", chain(lambda: x.mean())), ("x.index_select", chain(lambda: x.index_select(0, idx))),
            ("cat([x, z])", chain(lambda: torch.cat([x, z]))), ("mm 16x16", chain(lambda: m @ m)),
            ("addmm 16x16", chain(lambda: torch.addmm(bias, m, m))), ("bmm 4x8x8", chain(lambda: b3 @ b3)),
            ("relu(x)", chain(lambda: torch.relu(x))), ("x.exp()", chain(lambda: x.exp())),
            ("x > z", chain(lambda: x > z)), ("where(c, x, z)", chain(lambda: torch.where(c, x, z))),
            ("x.clamp(-1, 1)", chain(lambda: x.clamp(-1, 1))), ("x.clone()", chain(lambda: x.clone())),
            ("empty(256)", empty), ("x.view(16, 16)", view)]


def paired_ratio(fn_n, fn_m, sync_n, sync_m, chunk, pairs):
    fn_n(50), fn_m(50)
    sync_n(), sync_m()
    ratios = []
    for _ in range(pairs):
        t0 = time.perf_counter()
        fn_n(chunk)
        sync_n()
        t1 = time.perf_counter()
        fn_m(chunk)
        sync_m()
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
    return statistics.median(ratios)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--paired", action="store_true", help="median of paired chunk ratios (scale-free)")
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--chunk", type=int, default=200)
    ap.add_argument("--only", default=None, help="comma-separated row names to run (e.g. 'empty(256),y * z')")
    args = ap.parse_args()
    driver = torch.musa.get_driver_name()
    native = "cuda" if driver == "cuda" else "cpu"
    if native == "cuda" and not torch.cuda.is_available():
        sys.exit("the cuda driver is active but torch.cuda is not available: use a CUDA-enabled torch, "
                 "or TORCH_MUSA_DRIVER=host to measure against the CPU")
    sync = {"cpu": lambda: None, "cuda": torch.cuda.synchronize}[native]
    if args.paired:
        print(f"musa driver: {driver}; native reference: {native}; median of {args.pairs} paired "
              f"{args.chunk}-op chunks, musa time over native time")
        for (name, fn_n), (_, fn_m) in zip(variants(native), variants("musa")):
            if args.only and name not in args.only.split(","):
                continue
            r = paired_ratio(fn_n, fn_m, sync, torch.musa.synchronize, args.chunk, args.pairs)
            print(f"{name:<18} {r:>6.3f}")
        return
    print(f"musa driver: {driver}; native reference: {native}; {args.n} ops x {args.rounds} rounds (median)")
    print(f"{'op':<18} {'native us/op':>12} {'musa us/op':>11} {'extra us':>9} {'ratio':>6}")
    rows_n, rows_m = variants(native), variants("musa")
    for (name, fn_n), (_, fn_m) in zip(rows_n, rows_m):
        # alternate so drift on a noisy machine hits both sides alike
        a = min(chain_us(fn_n, sync, args.n, args.rounds), chain_us(fn_n, sync, args.n, args.rounds))
        b = min(chain_us(fn_m, torch.musa.synchronize, args.n, args.rounds),
                chain_us(fn_m, torch.musa.synchronize, args.n, args.rounds))
        print(f"{name:<18} {a:>12.2f} {b:>11.2f} {b - a:>9.2f} {b / a:>6.2f}")


if __name__ == "__main__":
    main()
