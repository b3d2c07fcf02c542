"""Where torch.profiler's cost on a training step goes, musa next to native (a diagnostic for
bench/profiler_bench.py's floor).

    python bench/profiler_breakdown.py [--size launch|realistic] [--steps N]

profiler_bench's GPT step (same sizes) runs, in one fresh process per device, with no profiler
and under four profiles: CPU ops only, without and with record_shapes/profile_memory, and CPU ops
plus device activity (PrivateUse1 on musa, CUDA/CUPTI natively), without and with them. Each cell
is a median ms per step, as the CPU's issue time (the step's calls before the synchronize: the
CPU's cost, which a device-bound plain step hides) and as wall time, and its slowdown against the
plain step. On musa the device profiles also run with musa's own device events and runtime calls
left out (TORCH_MUSA_PROFILER_DEVICE_ACTIVITY=0; on the cuda driver CUPTI's kernels stay), which
isolates what they cost. The full profile's trace is then counted per step by
category (cpu_op, the runtime calls, memory events, kernels, ...), with the most frequent runtime
call names, so a per-op cost shows up as either more events or dearer ones.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver")


def _calls_by_op(trace):
    """Runtime calls counted by the innermost CPU op they ran in (same thread, within its span)."""
    import bisect

    ops = collections.defaultdict(list)
    for e in trace:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X":
            ops[e["tid"]].append(e)
    starts = {}
    for tid, lst in ops.items():
        lst.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))  # a parent before a child that starts with it
        starts[tid] = [e["ts"] for e in lst]
    by_op = collections.Counter()
    for e in trace:
        if e.get("cat") not in RUNTIME_CATS:
            continue
        lst, inner = ops.get(e["tid"], []), "(no cpu op)"
        i = bisect.bisect_right(starts.get(e["tid"], []), e["ts"]) - 1
        while i >= 0:  # the latest-starting op that still spans the call is the innermost
            if lst[i]["ts"] + lst[i].get("dur", 0) >= e["ts"]:
                inner = lst[i]["name"]
                break
            i -= 1
        by_op[f"{e['name']} in {inner}"] += 1
    return by_op


def child(device, quick, steps):
    from profiler_bench import training_step

    torch, step, dev_act = training_step(device, quick)
    from torch.profiler import ProfilerActivity, profile
    from host_bench import sync

    if device == "cpu" or (device == "musa" and torch.musa.get_driver_name() == "host"):
        torch.set_num_threads(1)

    def timed():
        """Median ms per step: the CPU's issue time (the step's calls, before the synchronize:
        what the CPU costs, whatever the device's speed) and the wall time (with it)."""
        issue, wall = [], []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            t1 = time.perf_counter()
            sync(device)
            issue.append(t1 - t0)
            wall.append(time.perf_counter() - t0)
        return [round(statistics.median(v) * 1e3, 3) for v in (issue, wall)]

    for _ in range(3):
        step()
    sync(device)
    out = {"plain": timed()}
    variants = [("cpu ops", [ProfilerActivity.CPU], False), ("cpu ops +shapes+memory", [ProfilerActivity.CPU], True)]
    if device == "musa":  # the same without musa's own device events and runtime calls (CUPTI's stay)
        variants += [("+device, musa's off", [ProfilerActivity.CPU, dev_act], False),
                     ("+device +s+m, musa's off", [ProfilerActivity.CPU, dev_act], True)]
    if dev_act is not None:
        variants += [("+device", [ProfilerActivity.CPU, dev_act], False),
                     ("+device +shapes+memory", [ProfilerActivity.CPU, dev_act], True)]
    for name, acts, full in variants:
        os.environ["TORCH_MUSA_PROFILER_DEVICE_ACTIVITY"] = "0" if "musa's off" in name else "1"
        with profile(activities=acts, profile_memory=full, record_shapes=full) as prof:
            out[name] = timed()
        if name == "cpu ops":  # where the CPU's time goes, op by op (self time, us per step)
            out["cpu op self us"] = {e.key: round(e.self_cpu_time_total / steps, 1) for e in prof.key_averages()}
    # The last profile (the fullest): its events per step, by category and runtime-call name.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)["traceEvents"]
    cats = collections.Counter(e.get("cat", "?") for e in trace if e.get("ph") in ("X", "i"))
    calls = collections.Counter(e["name"] for e in trace if e.get("cat") in RUNTIME_CATS)
    out["events per step"] = {k: round(v / steps, 1) for k, v in cats.most_common()}
    out["runtime calls per step"] = {k: round(v / steps, 1) for k, v in calls.most_common(14)}
    out["runtime calls by cpu op"] = {k: round(v / steps, 1) for k, v in _calls_by_op(trace).most_common(24)}
    ops = collections.Counter(e["name"] for e in trace if e.get("cat") == "cpu_op")
    out["cpu op names"] = {k: v / steps for k, v in ops.items()}
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=("launch", "realistic"), default="launch")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--child")
    a = ap.parse_args()
    quick = a.size == "launch"
    if a.child:
        return child(a.child, quick, a.steps)
    import torch
    import torch_musa  # noqa: F401
    native = "cpu" if torch.musa.get_driver_name() == "host" else "cuda"
    res = {}
    for d in ("musa", native):
        env = dict(os.environ)
        if d != "musa":
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        args = [sys.executable, __file__, "--child", d, "--size", a.size, "--steps", str(a.steps)]
        r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise RuntimeError(f"{d} failed:\n{r.stderr[-3000:]}")
        res[d] = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"\nprofiler cost breakdown, {a.size} GPT step, driver '{torch.musa.get_driver_name()}', "
          f"{a.steps} steps per cell, median ms/step (slowdown against plain)")
    rows = [k for k in res["musa"] if k not in ("events per step", "runtime calls per step", "runtime calls by cpu op",
                                               "cpu op names", "cpu op self us")]
    for i, what in enumerate(("CPU issue time (before the synchronize)", "wall time")):
        print(f"\n{what}")
        print(f"| {'profile':24} | {'musa':>16} | {native:>16} | {'musa/native slowdown':>20} |")
        for k in rows:
            # The CPU has no device activity: its CPU profile is the native reference there.
            ref = k.replace(", musa's off", "").replace("+s+m", "+shapes+memory")
            m, n = res["musa"].get(k), res[native].get(ref, res[native].get(ref.replace("+device", "cpu ops")))
            if m is None or n is None:
                continue
            sm, sn = m[i] / res["musa"]["plain"][i], n[i] / res[native]["plain"][i]
            print(f"| {k:24} | {m[i]:8.2f} ({sm:5.2f}) | {n[i]:8.2f} ({sn:5.2f}) | {sm / sn:20.3f} |")
    for key in ("events per step", "runtime calls per step", "runtime calls by cpu op"):
        print(f"\n{key} (fullest profile):")
        names = list(dict.fromkeys(list(res["musa"][key]) + list(res[native][key])))
        for n in names:
            print(f"  {n[:70]:70} musa {res['musa'][key].get(n, 0):9.1f}   {native} {res[native][key].get(n, 0):9.1f}")
    m, n = res["musa"]["cpu op self us"], res[native]["cpu op self us"]
    print(f"\nCPU self time per step by op under the CPU-op profile (us), the largest differences; "
          f"total musa {sum(m.values()):.0f}, {native} {sum(n.values()):.0f}:")
    for k in sorted(set(m) | set(n), key=lambda k: -abs(m.get(k, 0) - n.get(k, 0)))[:20]:
        print(f"  {k[:60]:60} musa {m.get(k, 0):8.1f}   {native} {n.get(k, 0):8.1f}")
    m, n = res["musa"]["cpu op names"], res[native]["cpu op names"]
    diff = sorted(set(m) | set(n), key=lambda k: -abs(m.get(k, 0) - n.get(k, 0)))[:16]
    print("\ncpu ops per step, the largest differences (fullest profile):")
    for k in diff:
        print(f"  {k[:60]:60} musa {m.get(k, 0):8.1f}   {native} {n.get(k, 0):8.1f}")


if __name__ == "__main__":
    main()
