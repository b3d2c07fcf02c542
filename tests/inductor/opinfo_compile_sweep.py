"""OpInfo compile sweep: each op_db entry's first float32 sample under torch.compile, against eager.

For every entry of PyTorch's ``op_db`` whose float32 samples can be made on musa, the
first sample runs eagerly on musa and through ``torch.compile`` (Inductor, a fresh
compile per entry, ``fullgraph=False`` so an op Dynamo cannot trace runs eagerly as it
would for a user), and the results are compared with the OpInfo sweep's comparison
(tensors with float32 ``assert_close`` tolerances, values not compared for random and
uninitialised ops). Each pass records how many graphs Inductor compiled: a pass that
Dynamo ran eagerly counts, as it would for a user, but shows 0. Entries whose eager
run raises are counted as ``skip``: there is nothing to compare a compiled result
with. A compiled run that raises is a failure.

    python -m tests.inductor.opinfo_compile_sweep [--every N] [--shard K/M] [--ops a,b] [--json out.json]
    python -m tests.inductor.opinfo_compile_sweep --merge a.json b.json ...

``--every N`` takes every N-th entry (CI runs a slice; the full sweep is ``--every 1``).
``--shard K/M`` takes the K-th of M interleaved slices of those, so M processes can share
the sweep (compiles are CPU-bound); ``--merge`` sums their ``--json`` files.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from tests.ops import opinfo_sweep as base


def _alarm(signum, frame):
    raise TimeoutError("entry took too long")


def run_entry(op, timeout):
    import torch

    name = base.entry_name(op)
    try:
        sample = next(iter(op.sample_inputs("musa", torch.float32, requires_grad=False)))
    except StopIteration:
        return {"name": name, "status": "skip", "reason": "no float32 sample"}
    except Exception as e:  # the sample cannot even be made
        return {"name": name, "status": "skip", "reason": f"sample: {base._first_line(e)}"}
    if not op.supports_dtype(torch.float32, "cpu"):
        return {"name": name, "status": "skip", "reason": "no float32 kernel"}

    def call(inp, *args, **kwargs):
        return op(inp, *args, **kwargs)

    clone = lambda: (base.move(sample.input, "musa"), base.move(sample.args, "musa"),  # noqa: E731
                     base.move(sample.kwargs, "musa"))
    try:
        inp, args, kwargs = clone()
        ref = call(inp, *args, **kwargs)
    except Exception as e:
        return {"name": name, "status": "skip", "reason": f"eager raises: {base._first_line(e)}"}
    metadata_only = name in base.METADATA_ONLY_REASON or (
        name in base.RANDOM_SAMPLES and base.RANDOM_SAMPLES[name](sample))
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        inp, args, kwargs = clone()
        out = torch.compile(call)(inp, *args, **kwargs)
        base.compare(base.move(ref, "cpu"), out, "musa", metadata_only)
        # How many graphs Inductor compiled (or took from its cache): 0 means Dynamo ran it eagerly.
        compiled = counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_hit"]
        return {"name": name, "status": "pass", "inductor_graphs": compiled}
    except base.Mismatch as e:
        return {"name": name, "status": "fail", "reason": f"{e.kind}: {base._first_line(e)}"}
    except Exception as e:
        return {"name": name, "status": "fail", "reason": f"{type(e).__name__}: {base._first_line(e)}"}
    finally:
        signal.alarm(0)


def sweep(every=1, names=None, timeout=120, progress=False, shard=(0, 1)):
    import torch  # noqa: F401
    import torch_musa  # noqa: F401

    ops = base._load_ops(names)[::every][shard[0]::shard[1]]
    results = []
    for i, op in enumerate(ops):
        t0 = time.time()
        r = run_entry(op, timeout)
        r["seconds"] = round(time.time() - t0, 2)
        results.append(r)
        if progress:
            print(f"[{i + 1}/{len(ops)}] {r['name']}: {r['status']} {r.get('reason', '')}", flush=True)
    return results


def summarize(results):
    counts = {s: sum(r["status"] == s for r in results) for s in ("pass", "fail", "skip")}
    tested = counts["pass"] + counts["fail"]
    compiled = sum(r.get("inductor_graphs", 0) > 0 for r in results if r["status"] == "pass")
    return {**counts, "tested": tested, "pass_rate": counts["pass"] / tested if tested else 0.0,
            "passed_through_inductor": compiled}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--shard", default="0/1", help="K/M: the K-th of M interleaved slices")
    ap.add_argument("--ops", default="")
    ap.add_argument("--json")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--merge", nargs="+", help="sum the results of these --json files")
    args = ap.parse_args(argv)
    if args.merge:
        # one result per entry (a slice's file given twice counts once)
        results = list({r["name"]: r for path in args.merge for r in json.load(open(path))["results"]}.values())
    else:
        k, m = (int(v) for v in args.shard.split("/"))
        if not 0 <= k < m:
            ap.error(f"--shard {args.shard}: K must be in [0, M)")
        results = sweep(args.every, [n for n in args.ops.split(",") if n], args.timeout, progress=True,
                        shard=(k, m))
    summary = summarize(results)
    print(json.dumps(summary))
    for r in results:
        if r["status"] == "fail":
            print(f"FAIL {r['name']}: {r['reason']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "results": results}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
