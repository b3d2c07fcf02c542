"""mccl against the native collective backend, in the same run.

    python3 bench/dist_bench.py [--world 2] [--rounds 3] [--max-mib 256] [--ddp] [--quick] [--modes sync,async]
                                [--skip-check] [--paired [--alternations 3]]
    python3 bench/dist_bench.py --cost [--world 1] [--rounds 2] [--alternations 7] [--cases all_reduce,...]

Host driver: mccl on musa tensors (Gloo over musa memory) against Gloo on CPU tensors. cuda driver:
mccl on musa tensors against NCCL on CUDA tensors (world 1 on a one-GPU machine: the per-call cost).
Each round starts fresh rank processes for each side, alternating native and musa; the table shows
the median bus bandwidth over rounds (all_reduce and the coalesced block: 2(n-1)/n * bytes / t;
all_gather_into_tensor and reduce_scatter_tensor: (n-1)/n * bytes of the full tensor / t; broadcast:
bytes / t; at world 1 the plain bytes / t), and musa/native ratios. --cases picks the collectives
(all_reduce, all_gather_into_tensor and reduce_scatter_tensor by default; broadcast and coalesced_8
too). Each op is timed synchronous (async_op=False) and asynchronous (async_op=True,
then Work.wait()). "musa" is mccl with the cross-rank signature check off (TORCH_MCCL_CHECK_COLLECTIVES=0:
the configuration the floors judge); "check" is with it on (the host driver's default; at world 1 there
is nothing to check). --paired times native and musa in the same rank processes (mccl's default
group and a native group beside it), alternating --alternations times (3) per op and size with the
order flipped each time: a process's own speed (seen to move a world-1 call by 2x between processes on
the H200) then applies to both sides. Its ratio is the median over rounds and alternations of each
alternation's own musa/native ratio (the two batches timed back to back), not the ratio of the two
sides' medians: a drift in the machine's speed within a round then cancels too. The floor column
says whether the row meets the issue's floor: cuda driver >= 0.95 at every size; host driver >= 0.95
from 1 MiB, >= 0.80 below. --ddp adds a DDP training step of a ~100M-parameter MLP (samples/s).

--cost reports what mccl adds to a call, in microseconds: native and musa timed in the same rank
processes, batches of the same number of calls interleaved (order flipped each alternation), each
alternation's (musa - native) / calls, median over alternations and rounds. Cases: all_reduce,
all_gather_into_tensor, reduce_scatter_tensor, broadcast, and a coalesced block of 8 all_reduces
(the size split over the 8), sync and async (+ wait()), 4 KiB to --max-mib. Floors (cuda driver):
<= 0.5 us sync, <= 1.0 us async; the host driver keeps its ratio floors (the ratio column).
One GPU: TORCH_MUSA_DIST_DRIVER=cuda python3 bench/dist_bench.py --cost --world 1 --rounds 2 (sized for
about 2 minutes: 90 cells of 14 batches of ~20 ms a round); two GPUs: the same with --world 2.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")
MODES = ("sync", "async")
CASES = OPS + ("broadcast", "coalesced_8")  # --cases; --cost runs all five by default
COST_FLOORS_US = {"sync": 0.5, "async": 1.0}


def _sizes(max_mib):
    s, out = 4096, []
    while s <= max_mib << 20:
        out.append(s)
        s *= 4
    return out


def _setup(side):
    """This rank's device, backend name and synchronize for `side` ("native" or "musa...")."""
    import torch

    if side.startswith("musa"):
        torch.musa.set_device(int(os.environ["LOCAL_RANK"]))
        return torch.device("musa", torch.musa.current_device()), "mccl", torch.musa.synchronize
    if os.environ["TORCH_MUSA_DRIVER"] == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        return torch.device("cuda", torch.cuda.current_device()), "nccl", torch.cuda.synchronize
    return torch.device("cpu"), "gloo", (lambda: None)


def _timed_calls(device, sync, group, world, op, mode, size):
    """A timer for one op/mode/size on `group`: each call times a batch grown until it takes
    DIST_BENCH_MIN_S (0.2 s by default; the same count on every rank) and returns the bus bandwidth
    in GB/s."""
    import torch
    import torch.distributed as dist

    factor = {"all_reduce": 2 * (world - 1) / world, "coalesced_8": 2 * (world - 1) / world, "broadcast": 1.0,
              "all_gather_into_tensor": (world - 1) / world, "reduce_scatter_tensor": (world - 1) / world}[op] \
        if world > 1 else 1.0
    call = _case(op, device, group, world, size)
    fn = (lambda: call(False)) if mode == "sync" else (lambda: call(True).wait())
    for _ in range(2):
        fn()
    sync()
    # The ranks line up on a one-element all_reduce of this side's device: dist.barrier picks
    # torch's current accelerator (musa once torch_musa is loaded), which a native group lacks.
    token = torch.zeros(1, device=device)
    min_s = float(os.environ.get("DIST_BENCH_MIN_S", "0.2"))

    def barrier():
        dist.all_reduce(token, group=group)
        sync()

    def slowest(t):
        # Every rank must make the same choice of batch length (a rank that stops growing while
        # another goes on leaves both waiting in different collectives): they agree on the
        # slowest rank's time.
        v = torch.tensor([t], dtype=torch.float64, device=device)
        dist.all_reduce(v, op=dist.ReduceOp.MAX, group=group)
        return v.item()

    def timed():
        iters = 1
        while True:
            barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            sync()
            t = slowest(time.perf_counter() - t0)  # the barrier lined the ranks up
            if t > min_s or iters >= 4096:
                return factor * size / (t / iters) / 1e9
            iters *= 4
    return timed


def worker(side, max_mib, ddp, modes, alternations=3, ops=OPS):
    """One rank: time every op and size on `side` ("native", "musa", "musa_check", or "paired": native
    and musa in this one process, interleaved); rank 0 reports."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device, backend, sync = _setup("musa" if side == "paired" else side)
    dist.init_process_group(backend, rank=rank, world_size=world)
    groups = {side: (device, sync, None)}
    if side == "paired":  # mccl's default group, and a native group for the native device
        device, backend, sync = _setup("native")
        # Both sides name their group: with group=None every call looks the default group up
        # in Python (about 2.7k instructions a call on the host), which only one side would pay.
        groups = {"musa": (*groups[side][:2], dist.group.WORLD),
                  "native": (device, sync, dist.new_group(backend=backend))}
    out = {}
    for size in _sizes(max_mib):
        for op, mode in ((op, mode) for op in ops for mode in modes):
            timers = {name: _timed_calls(d, sy, g, world, op, mode, size) for name, (d, sy, g) in groups.items()}
            # Paired: alternations, the order flipping each time; every sample is kept (main pairs them).
            reps = alternations if len(timers) > 1 else 1
            order = list(timers)
            got = {name: [] for name in timers}
            for i in range(reps):
                for name in (order if i % 2 == 0 else order[::-1]):
                    got[name].append(timers[name]())
            for name, v in got.items():
                if side == "paired":
                    out[f"{name}:{op}/{mode}/{size}"] = v
                else:
                    out[f"{op}/{mode}/{size}"] = statistics.median(v)
    if ddp:
        for name, (d, sy, g) in groups.items():
            out[f"{name}:ddp_samples_per_s" if side == "paired" else "ddp_samples_per_s"] = ddp_step(d, sy, g)
    dist.destroy_process_group()
    if rank == 0:
        with open(os.environ["MCCL_RESULT"], "w") as f:
            json.dump(out, f)


def _case(case, device, group, world, size):
    """One call of `case` over `size` bytes on `group`: fn(async_op) -> a Work to wait for, or None."""
    import torch
    import torch.distributed as dist

    n = max(world, size // 4 // world * world)
    full = torch.ones(n, device=device)
    part = torch.ones(n // world, device=device)
    if case == "all_reduce":
        return lambda a: dist.all_reduce(full, async_op=a, group=group)
    if case == "all_gather_into_tensor":
        return lambda a: dist.all_gather_into_tensor(full, part, async_op=a, group=group)
    if case == "reduce_scatter_tensor":
        return lambda a: dist.reduce_scatter_tensor(part, full, async_op=a, group=group)
    if case == "broadcast":
        return lambda a: dist.broadcast(full, src=0, async_op=a, group=group)
    members = [torch.ones(max(1, n // 8), device=device) for _ in range(8)]
    # With a device the block also starts and ends NCCL's coalescing (Gloo has none: its fast path only).
    block_device = device if os.environ["TORCH_MUSA_DRIVER"] == "cuda" else None

    def coalesced(a):
        with dist._coalescing_manager(group=group, device=block_device, async_ops=a) as cm:
            for t in members:
                dist.all_reduce(t, group=group)
        return cm if a else None
    return coalesced


def cost_worker(max_mib, modes, alternations, cases, batch_s):
    """One rank of --cost: native and musa in this process, batches of the same length interleaved
    per case, mode and size; rank 0 writes every batch's seconds (until done, issuing) and the batch
    length."""
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device, backend, sync = _setup("musa")
    dist.init_process_group(backend, rank=rank, world_size=world)
    musa = (device, sync, dist.group.WORLD)
    device, backend, sync = _setup("native")
    sides = {"musa": musa, "native": (device, sync, dist.new_group(backend=backend))}

    def lined_up(d, sy, g):
        token = torch.zeros(1, device=d)
        slowest = torch.zeros(2, dtype=torch.float64, device=d)

        def batch(fn, calls):
            """(seconds until the device is done, seconds issuing the calls), the slowest rank's."""
            dist.all_reduce(token, group=g)  # the ranks start together
            sy()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            sy()
            slowest.copy_(torch.tensor([time.perf_counter() - t0, t1 - t0], dtype=torch.float64))
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=g)  # every rank sees the same times
            return slowest.tolist()
        return batch

    batches = {name: lined_up(*side) for name, side in sides.items()}
    out = {}
    for size in _sizes(max_mib):
        for case in cases:
            calls = {name: _case(case, d, g, world, size) for name, (d, _, g) in sides.items()}
            for mode in modes:
                fns = {name: ((lambda c=c: c(False)) if mode == "sync" else (lambda c=c: c(True).wait()))
                       for name, c in calls.items()}
                for name, fn in fns.items():  # warm up, then a short batch sets the length
                    batches[name](fn, 3)
                probe = max(batches[name](fn, 8)[0] / 8 for name, fn in fns.items())
                n = int(min(4000, max(16, batch_s / max(probe, 1e-7))))
                got = {name: [] for name in fns}
                order = list(fns)
                for i in range(alternations):
                    for name in (order if i % 2 == 0 else order[::-1]):
                        got[name].append(batches[name](fns[name], n))
                out[f"{case}/{mode}/{size}"] = {"calls": n, **got}
            del calls
    dist.destroy_process_group()
    if rank == 0:
        with open(os.environ["MCCL_RESULT"], "w") as f:
            json.dump(out, f)


def report_cost(a, modes, cases, driver, world):
    """--cost: fresh rank processes per round; per cell the median over every alternation of
    (musa - native) / calls, in microseconds."""
    from tests.distributed.launcher import run_ranks

    cells = {}
    for _ in range(a.rounds):
        res = run_ranks("cost_worker", world, timeout=1800, env={"TORCH_MCCL_CHECK_COLLECTIVES": "0"},
                        module="bench.dist_bench", args=(str(a.max_mib), ",".join(modes), str(a.alternations),
                                                         ",".join(cases), str(a.batch_s)))[0]
        for k, v in res.items():
            c = cells.setdefault(k, {"native": [], "musa": [], "added": [], "ratio": [], "issue_added": []})
            us = 1e6 / v["calls"]
            c["native"] += [t * us for t, _ in v["native"]]
            c["musa"] += [t * us for t, _ in v["musa"]]
            c["added"] += [(m - n) * us for (m, _), (n, _) in zip(v["musa"], v["native"])]
            c["ratio"] += [n / m for (m, _), (n, _) in zip(v["musa"], v["native"])]
            # issuing alone: where "added" exceeds it, the device (not the call) took the extra time
            c["issue_added"] += [(m - n) * us for (_, m), (_, n) in zip(v["musa"], v["native"])]
    med = statistics.median
    print(f"mccl's added cost per call over {'gloo (cpu)' if driver == 'host' else 'nccl (cuda)'}, world {world}, "
          f"driver {driver}: {a.rounds} round(s) x {a.alternations} alternations, interleaved in each process; "
          "us per call until the device is done (medians); added = median of each alternation's musa - native "
          "(spread: its quartiles; issuing: the same for the time issuing the calls)")
    print(f"{'case':24s} {'mode':5s} {'size':>9s} {'native':>9s} {'musa':>9s} {'added':>8s} {'spread':>15s} "
          f"{'issuing':>8s} {'ratio':>6s} floor")
    short = []
    for case in cases:
        for mode in modes:
            for size in _sizes(a.max_mib):
                c = cells[f"{case}/{mode}/{size}"]
                added, ratio = med(c["added"]), med(c["ratio"])
                q = statistics.quantiles(c["added"], n=4) if len(c["added"]) > 1 else [added] * 3
                label = f"{size >> 10} KiB" if size < 1 << 20 else f"{size >> 20} MiB"
                if driver == "cuda":
                    floor, ok = f"<={COST_FLOORS_US[mode]:.1f}us", added <= COST_FLOORS_US[mode]
                else:
                    f = 0.95 if size >= 1 << 20 else 0.80
                    floor, ok = f">={f:.2f}", ratio >= f
                if not ok:
                    short.append(f"{case} {mode} {label}")
                print(f"{case:24s} {mode:5s} {label:>9s} {med(c['native']):9.2f} {med(c['musa']):9.2f} {added:+8.2f} "
                      f"{f'[{q[0]:+.2f},{q[2]:+.2f}]':>15s} {med(c['issue_added']):+8.2f} {ratio:6.3f} {floor} "
                      f"{'ok' if ok else 'ABOVE'}")
    print("every row meets its floor" if not short else f"off the floor: {', '.join(short)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"driver": driver, "world": world, "rounds": a.rounds, "alternations": a.alternations,
                       "cells": cells}, f)


def ddp_step(device, sync, group=None, steps=3, batch=8):
    import torch
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    width = 4096  # 6 layers of 4096 x 4096: ~100M parameters
    model = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(6)]).to(device)
    model = DDP(model, process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=device)

    def step():
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()

    step()
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return steps * batch / (time.perf_counter() - t0)


def main():
    from tests.distributed.launcher import run_ranks

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-mib", type=int, default=256)
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--quick", action="store_true", help="1 round, up to 16 MiB")
    ap.add_argument("--modes", default="sync,async", help="sync, async or both (comma-separated)")
    ap.add_argument("--skip-check", action="store_true",
                    help="leave out the check-on side (at world 1 it has nothing to check)")
    ap.add_argument("--paired", action="store_true",
                    help="native and musa in the same rank processes, interleaved per op and size (a fresh "
                         "process each round): no process-to-process spread between the two sides")
    ap.add_argument("--alternations", type=int, default=None,
                    help="--paired / --cost: native/musa alternations per cell (3 / 7)")
    ap.add_argument("--cost", action="store_true",
                    help="mccl's added microseconds per call over native, both sides in the same processes")
    ap.add_argument("--cases", default=None,
                    help=f"any of {', '.join(CASES)} (default: the first three; --cost: all five)")
    ap.add_argument("--batch-s", type=float, default=0.02, help="--cost: seconds a timed batch aims at")
    ap.add_argument("--json", default=None, help="--cost: also write every alternation's figures here")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        ap.error(f"--modes takes {', '.join(MODES)}; got {a.modes}")
    driver = os.environ.get("TORCH_MUSA_DIST_DRIVER", "host")
    cases = [c for c in (a.cases or ",".join(CASES if a.cost else OPS)).split(",") if c]
    if any(c not in CASES for c in cases):
        ap.error(f"--cases takes {', '.join(CASES)}; got {a.cases}")
    if a.cost:
        a.alternations = 7 if a.alternations is None else a.alternations
        if a.alternations < 5:
            ap.error(f"--cost takes the median over at least 5 alternations; got --alternations {a.alternations}")
        if a.quick:
            a.rounds, a.max_mib = 1, 16
        return report_cost(a, modes, cases, driver, a.world or 1)
    a.alternations = 3 if a.alternations is None else a.alternations
    if a.paired and not a.skip_check:
        ap.error("--paired compares native and mccl within each process; the check-on side would run in "
                 "processes of its own: add --skip-check")
    if a.quick:
        a.rounds, a.max_mib = 1, 16
    world = a.world or (2 if driver == "host" else 1)
    sides = ("native", "musa") if a.skip_check else ("native", "musa", "musa_check")
    launches = (("paired",) + sides[2:]) if a.paired else sides
    runs = {s: [] for s in sides}
    pair_ratios = {}  # --paired: op/mode/size -> each alternation's musa/native ratio, all rounds
    for _ in range(a.rounds):
        for side in launches:
            env = {"TORCH_MCCL_CHECK_COLLECTIVES": "1" if side == "musa_check" else "0"}
            if side == "native":
                env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # native runs without torch_musa loaded
            res = run_ranks("worker", world, timeout=1800, env=env, module="bench.dist_bench",
                            args=(side, str(a.max_mib), "1" if a.ddp else "0", ",".join(modes),
                                  str(a.alternations), ",".join(cases)))[0]
            if side != "paired":
                runs[side].append(res)
                continue
            for name in ("native", "musa"):
                runs[name].append({k.split(":", 1)[1]: v for k, v in res.items() if k.startswith(name + ":")})
            for k, v in runs["musa"][-1].items():
                if isinstance(v, list):
                    pair_ratios.setdefault(k, []).extend(m / n for m, n in zip(v, runs["native"][-1][k]))
    med = {s: {k: statistics.median(x for r in runs[s] for x in (r[k] if isinstance(r[k], list) else [r[k]]))
               for k in runs[s][0]} for s in sides}
    native_name = "gloo (cpu)" if driver == "host" else "nccl (cuda)"
    how = (f"paired in each rank process, ratio = median of {a.rounds * a.alternations} alternations' own ratios"
           if a.paired else "separate processes")
    print(f"mccl vs {native_name}, world {world}, driver {driver}, median of {a.rounds} round(s), {how}; "
          "GB/s (bus)")
    print(f"{'op':24s} {'mode':5s} {'size':>9s} {'native':>9s} {'musa':>9s} {'ratio':>6s} {'check':>9s} {'ratio':>6s} floor")
    short = []
    for op in cases:
        for mode in modes:
            for size in _sizes(a.max_mib):
                k = f"{op}/{mode}/{size}"
                n, m = med["native"][k], med["musa"][k]
                ratio = statistics.median(pair_ratios[k]) if k in pair_ratios else m / n
                mc = med["musa_check"][k] if "musa_check" in med else float("nan")
                label = f"{size >> 10} KiB" if size < 1 << 20 else f"{size >> 20} MiB"
                floor = 0.95 if driver == "cuda" or size >= 1 << 20 else 0.80
                verdict = "ok" if ratio >= floor else "BELOW"
                if verdict != "ok":
                    short.append(f"{op} {mode} {label}")
                print(f"{op:24s} {mode:5s} {label:>9s} {n:9.3f} {m:9.3f} {ratio:6.2f} {mc:9.3f} {mc / n:6.2f} "
                      f">={floor:.2f} {verdict}")
    print("every row meets its floor" if not short else f"below the floor: {', '.join(short)}")
    if a.ddp:
        n, m = med["native"]["ddp_samples_per_s"], med["musa"]["ddp_samples_per_s"]
        mc = med["musa_check"]["ddp_samples_per_s"] if "musa_check" in med else float("nan")
        print(f"{'DDP step, 100M MLP':24s} {'':5s} {'samples/s':>9s} {n:9.2f} {m:9.2f} {m / n:6.2f} {mc:9.2f} "
              f"{mc / n:6.2f} >=0.90")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5].split(","),
               int(sys.argv[6]) if len(sys.argv) > 6 else 3, sys.argv[7].split(",") if len(sys.argv) > 7 else OPS)
    elif len(sys.argv) > 1 and sys.argv[1] == "cost_worker":
        cost_worker(int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5].split(","),
                    float(sys.argv[6]))
    else:
        main()
