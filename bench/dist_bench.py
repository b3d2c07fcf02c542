"""mccl against the native collective backend, in the same run.

    python3 bench/dist_bench.py [--world 2] [--rounds 3] [--max-mib 256] [--ddp] [--quick] [--modes sync,async]
                                [--skip-check] [--paired [--alternations 3]]

Host driver: mccl on musa tensors (Gloo over musa memory) against Gloo on CPU tensors. cuda driver:
mccl on musa tensors against NCCL on CUDA tensors (world 1 on a one-GPU machine: the per-call cost).
Each round starts fresh rank processes for each side, alternating native and musa; the table shows
the median bus bandwidth over rounds (all_reduce: 2(n-1)/n * bytes / t; all_gather_into_tensor and
reduce_scatter_tensor: (n-1)/n * bytes of the full tensor / t; at world 1 the plain bytes / t), and
musa/native ratios. Each op is timed synchronous (async_op=False) and asynchronous (async_op=True,
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

    n = size // 4
    full = torch.ones(n, device=device)
    part = torch.ones(n // world, device=device)
    calls = {"all_reduce": lambda a: dist.all_reduce(full, async_op=a, group=group),
             "all_gather_into_tensor": lambda a: dist.all_gather_into_tensor(full, part, async_op=a, group=group),
             "reduce_scatter_tensor": lambda a: dist.reduce_scatter_tensor(part, full, async_op=a, group=group)}
    factor = {"all_reduce": 2 * (world - 1) / world, "all_gather_into_tensor": (world - 1) / world,
              "reduce_scatter_tensor": (world - 1) / world}[op] if world > 1 else 1.0
    call = calls[op]
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


def worker(side, max_mib, ddp, modes, alternations=3):
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
        for op, mode in ((op, mode) for op in OPS for mode in modes):
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
    ap.add_argument("--alternations", type=int, default=3, help="--paired: native/musa alternations per op and size")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        ap.error(f"--modes takes {', '.join(MODES)}; got {a.modes}")
    if a.paired and not a.skip_check:
        ap.error("--paired compares native and mccl within each process; the check-on side would run in "
                 "processes of its own: add --skip-check")
    if a.quick:
        a.rounds, a.max_mib = 1, 16
    driver = os.environ.get("TORCH_MUSA_DIST_DRIVER", "host")
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
                                  str(a.alternations)))[0]
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
    for op in OPS:
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
               int(sys.argv[6]) if len(sys.argv) > 6 else 3)
    else:
        main()
