"""torch_musa.optim.FusedAdamW against the foreach path and against native fused AdamW.

    python bench/optim_bench.py [--rounds N] [--steps S] [--paired]

One optimizer step over a GPT-sized parameter set (GPT-2 small's shapes, 124M parameters, on the
GPU; a 1/8 scale of it on the host driver), timed as the median of steps. Cells: musa FusedAdamW,
musa AdamW(foreach=True), and the native device's AdamW(fused=True) and AdamW(foreach=True)
(the CPU on the host driver, cuda on the GPU), each cell in a fresh process, the native ones never
importing torch_musa. Each cell is timed two ways: one step then a synchronize (the step's
latency, host work included), and 5 steps back to back per synchronize (a training loop's view,
where the host queues the next step while the device runs). Ratios are medians over rounds of the
ratio within a round. --paired times the fused (then the foreach) cells of musa and the native device
in one process per round, interleaved, since the spread between processes on a machine can exceed
the difference measured (an optimizer step has no backward, so native runs beside torch_musa).
Floors (issue 19): musa fused faster than musa foreach on the GPU, and
>= 1.0x native fused.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def shapes(scale):
    d, vocab, layers = 768, 50257, 12
    out = [(vocab, d), (1024, d)]
    for _ in range(layers):
        out += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    out += [(d,), (d,)]
    return [tuple(max(1, int(n * scale)) if i == 0 else n for i, n in enumerate(s)) for s in out]


def child(device, kind, scale, steps):
    """Times one optimizer (device "musa" or the native one), or with device "paired" musa's and the
    native device's in this one process, interleaved (the order flipping), so that a process's own
    speed applies to both; prints the figures as JSON."""
    if device not in ("musa", "paired"):
        sys.modules["torch_musa"] = None
    import torch
    sys.path.insert(0, HERE)
    if device != "paired":
        print(json.dumps(measure(make_optimizer(device, kind, scale), device, steps)))
        return
    native = "cpu" if torch.musa.get_driver_name() == "host" else "cuda"
    opts = {d: make_optimizer(d, kind, scale) for d in ("musa", native)}
    got = {d: [] for d in opts}
    for rep in range(3):
        for d in (list(opts) if rep % 2 == 0 else list(opts)[::-1]):
            got[d].append(measure(opts[d], d, steps))
    print(json.dumps({d: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for d, rs in got.items()}))


def make_optimizer(device, kind, scale):
    import torch
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, device=device) * 0.02) for s in shapes(scale)]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    if kind == "fused" and device == "musa":
        from torch_musa.optim import FusedAdamW
        return FusedAdamW(params, lr=1e-4)
    return torch.optim.AdamW(params, lr=1e-4, **({"fused": True} if kind == "fused" else {"foreach": True}))


def measure(opt, device, steps):
    from host_bench import median_time, sync
    synced = median_time(opt.step, device, steps, warmup=2)
    queued = median_time(opt.step, device, steps, warmup=1, reps=5)
    host = []  # the host's own time per step: 5 steps queued, timed before the synchronize
    for _ in range(steps):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(5):
            opt.step()
        host.append((time.perf_counter() - t0) / 5)
    sync(device)
    return {"ms": synced * 1e3, "ms_queued": queued * 1e3, "ms_host": statistics.median(host) * 1e3,
            "params": sum(p.numel() for g in opt.param_groups for p in g["params"])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--child", nargs=2)
    ap.add_argument("--scale", type=float)
    ap.add_argument("--paired", action="store_true",
                    help="musa and native in the same process per kind, interleaved (a fresh process each "
                         "round): no process-to-process spread between the two sides")
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], a.child[1], a.scale, a.steps)
    import torch
    import torch_musa  # noqa: F401  (the driver decides the native reference)
    driver = torch.musa.get_driver_name()
    native = "cpu" if driver == "host" else "cuda"
    scale = 0.125 if driver == "host" else 1.0
    cells = {(d, k): [] for d in ("musa", native) for k in ("fused", "foreach")}
    n = 0
    def run_child(d, k):
        env = dict(os.environ, **({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"} if d not in ("musa", "paired") else {}))
        out = subprocess.run([sys.executable, __file__, "--child", d, k, "--scale", str(scale),
                              "--steps", str(a.steps)], env=env, capture_output=True, text=True, timeout=900)
        if out.returncode:
            raise RuntimeError(out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])

    for rnd in range(a.rounds):
        if a.paired:
            for k in ("fused", "foreach"):
                for d, r in run_child("paired", k).items():
                    cells[(d, k)].append(r)
                    n = r["params"]
            continue
        for d, k in (list(cells) if rnd % 2 == 0 else list(cells)[::-1]):  # alternate who goes first
            r = run_child(d, k)
            cells[(d, k)].append(r)
            n = r["params"]

    def med(cell, key):
        return statistics.median(r[key] for r in cells[cell])

    def ratio(num, den, key):  # median over rounds of den's speed relative to num's, within a round
        return statistics.median(a_[key] / b_[key] for a_, b_ in zip(cells[num], cells[den]))

    print(f"\nAdamW step over {n / 1e6:.1f}M parameters, musa driver '{driver}' vs native {native} "
          f"({a.rounds} rounds, medians, "
          + ("musa and native interleaved in one process per kind)" if a.paired else "fresh process per cell)"))
    print(f"| {'optimizer':28} | {'ms/step, synced':>15} | {'ms/step, 5 queued':>17} | {'host ms/step':>12} |")
    print(f"| {'-' * 28} | {'-' * 15} | {'-' * 17} | {'-' * 12} |")
    for d, k in cells:
        name = d + (" FusedAdamW" if d == "musa" and k == "fused" else f" AdamW({k}=True)")
        print(f"| {name:28} | {med((d, k), 'ms'):15.2f} | {med((d, k), 'ms_queued'):17.2f} | "
              f"{med((d, k), 'ms_host'):12.2f} |")
    fused, foreach, nat = ("musa", "fused"), ("musa", "foreach"), (native, "fused")
    for key, label in (("ms", "synced"), ("ms_queued", "queued")):
        print(f"{label}: musa fused vs musa foreach {ratio(foreach, fused, key):.3f}x; "
              f"vs native fused {ratio(nat, fused, key):.3f}x (floor >= 1.0 on the GPU)")


if __name__ == "__main__":
    main()
