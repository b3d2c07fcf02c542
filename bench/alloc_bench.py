"""Allocation-trace benchmark of the musa caching allocator (classic vs expandable segments).

    python bench/alloc_bench.py            # prints a table; add --quick for a short run
                                           # --rows musa:expandable,cuda:classic: only those

Traces (deterministic, replayed through caching_allocator_alloc/delete, no kernels):
  fsdp    per layer: all-gather a flat parameter buffer, keep activations, free the buffer; backward
          re-gathers, makes a full gradient, reduce-scatters it into a kept shard, frees the rest
  llm     a transformer training step whose sequence length changes every step (activations,
          quadratic attention scores, MLP temporaries; backward frees in reverse)
  random  sizes log-uniform in 1 MiB .. 512 MiB, interleaved frees, live set bounded
For each: peak reserved / peak allocated (goal with expandable segments: <= 1.05) and microseconds per
alloc+free pair (the whole trace, Python loop included, and a hot same-size loop). Every replay runs in
its own child process. When torch.cuda is available the same traces are replayed on torch.cuda's
allocator in a child with TORCH_DEVICE_BACKEND_AUTOLOAD=0 (no PrivateUse1 backend in that process).
"""
import json
import math
import os
import random
import subprocess
import sys
import time

MiB = 1 << 20


class Trace:
    """An allocation trace: ("a", id, size) and ("f", id) steps; ids count from 1."""

    def __init__(self):
        self.ops = []
        self.allocs = 0

    def alloc(self, size):
        self.allocs += 1
        self.ops.append(("a", self.allocs, size))
        return self.allocs

    def free(self, i):
        self.ops.append(("f", i))


def trace_fsdp(quick=False):
    layers, steps, world = (8, 2, 8) if quick else (24, 3, 8)
    flat = 96 * MiB + 12345  # unpadded flat parameter, as FSDP makes them
    act = 24 * MiB + 4096
    trace = Trace()
    a, f = trace.alloc, trace.free

    shards = [a(flat // world) for _ in range(layers)]  # local parameter shards
    grad_shards = {}
    for _ in range(steps):
        acts = []
        for _ in range(layers):  # forward
            g = a(flat)
            acts.append(a(act))
            tmp = a(act * 2)
            f(tmp)
            f(g)
        for li in reversed(range(layers)):  # backward
            g = a(flat)
            tmp = a(act * 2)
            grad = a(flat)
            f(tmp)
            rs = a(flat // world)
            f(grad)
            f(g)
            f(acts.pop())
            if li in grad_shards:
                f(rs)  # accumulated into the kept shard
            else:
                grad_shards[li] = rs
        opt = [a(flat // world) for _ in range(2)]  # optimizer temporaries
        for o in opt:
            f(o)
    for i in list(grad_shards.values()) + shards:
        f(i)
    return trace.ops


def trace_llm(quick=False):
    rng = random.Random(1)
    layers, steps, hidden, heads, vocab = (4, 6, 2048, 16, 32000) if quick else (12, 16, 2048, 16, 32000)
    trace = Trace()
    a, f = trace.alloc, trace.free

    weights = [a(12 * hidden * hidden * 2) for _ in range(layers)]
    for _ in range(steps):
        seq = rng.choice([256, 384, 512, 768, 1024, 1536, 2048]) + rng.randrange(0, 64) * 8
        x = seq * hidden * 2
        saved = []
        for _ in range(layers):
            qkv = a(3 * x)
            scores = a(heads * seq * seq * 2)
            probs = a(heads * seq * seq * 2)
            f(scores)
            attn = a(x)
            mlp = a(4 * x)
            act = a(4 * x)
            out = a(x)
            saved.append([qkv, probs, attn, mlp, act, out])
        logits = a(seq * vocab * 4)
        grad_logits = a(seq * vocab * 4)
        f(logits)
        f(grad_logits)
        for s in reversed(saved):
            g1 = a(4 * x)
            g2 = a(heads * seq * seq * 2)
            f(g2)
            g3 = a(3 * x)
            for i in s:
                f(i)
            f(g1)
            f(g3)
        grads = [a(12 * hidden * hidden * 2) for _ in range(layers)]
        for g in grads:
            f(g)
    for w in weights:
        f(w)
    return trace.ops


def trace_random(quick=False):
    rng = random.Random(2)
    n, budget = (300, 3 << 30) if quick else (2000, 6 << 30)
    trace, live, total = Trace(), [], 0
    for _ in range(n):
        size = int(math.exp(rng.uniform(math.log(MiB), math.log(512 * MiB))))
        while live and (total + size > budget or rng.random() < 0.4):
            i, s = live.pop(rng.randrange(len(live)))
            trace.free(i)
            total -= s
        live.append((trace.alloc(size), size))
        total += size
    for i, _ in live:
        trace.free(i)
    return trace.ops


TRACES = {"fsdp": trace_fsdp, "llm": trace_llm, "random": trace_random}


def child(backend, mode, trace, quick):
    if backend == "musa":
        import torch
        import torch_musa  # noqa: F401

        mem = torch.musa.memory
        torch.musa.init()
    else:
        import torch

        mem = torch.cuda.memory
        torch.cuda.init()
    ops = TRACES[trace](quick)
    alloc, free = mem.caching_allocator_alloc, mem.caching_allocator_delete
    # warm-up (creates streams, contexts) then a clean start
    p = alloc(MiB)
    free(p)
    mem.empty_cache()
    mem.reset_peak_memory_stats()
    ptrs = {}
    n_alloc = 0
    t0 = time.perf_counter()
    for op in ops:
        if op[0] == "a":
            ptrs[op[1]] = alloc(op[2])
            n_alloc += 1
        else:
            free(ptrs.pop(op[1]))
    dt = time.perf_counter() - t0
    stats = mem.memory_stats()
    peak_res, peak_alloc = stats["reserved_bytes.all.peak"], stats["allocated_bytes.all.peak"]
    assert stats["allocated_bytes.all.current"] == 0, "trace leaked"
    mem.empty_cache()
    # hot loop: the same 4 MiB block again and again (cache hits only)
    hot_n = 20000
    t1 = time.perf_counter()
    for _ in range(hot_n):
        free(alloc(4 * MiB))
    hot = (time.perf_counter() - t1) / hot_n * 1e6
    return {"peak_reserved": peak_res, "peak_allocated": peak_alloc, "us_per_pair": dt / n_alloc * 1e6,
            "hot_us_per_pair": hot, "allocs": n_alloc, "device_allocs": stats.get("num_device_alloc", 0)}


def run_child(backend, mode, trace, quick):
    env = dict(os.environ)
    conf = f"expandable_segments:{mode == 'expandable'}"
    if backend == "musa":
        env["PYTORCH_MUSA_ALLOC_CONF"] = conf
        env.setdefault("TORCH_MUSA_HOST_MEMORY", "64GiB")  # host driver: room for the classic mode's peaks
    else:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    args = [sys.executable, os.path.abspath(__file__), "--child", backend, mode, trace] + (["--quick"] if quick else [])
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def cuda_available():
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"], env=env,
                       capture_output=True, text=True)
    return r.stdout.strip() == "True"


def main():
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        backend, mode, trace = sys.argv[i + 1:i + 4]
        print(json.dumps(child(backend, mode, trace, "--quick" in sys.argv)))
        return
    quick = "--quick" in sys.argv
    # --rows musa:expandable,cuda:expandable measures only those allocators
    rows = None
    if "--rows" in sys.argv:
        known = [f"{b}:{m}" for b in ("musa", "cuda") for m in ("classic", "expandable")]
        i = sys.argv.index("--rows") + 1
        rows = sys.argv[i].split(",") if i < len(sys.argv) else []
        bad = [r for r in rows if r not in known]
        if not rows or bad:
            sys.exit(f"alloc_bench: --rows takes a comma-separated list of {', '.join(known)}"
                     f"{'; unknown: ' + ', '.join(bad) if bad else ''}")
    backends = ["musa"] + (["cuda"] if cuda_available() else [])
    driver = subprocess.run([sys.executable, "-c", "import torch, torch_musa; print(torch.musa.get_driver_name())"],
                            capture_output=True, text=True).stdout.strip()
    print(f"alloc_bench: musa driver = {driver}; torch.cuda comparison: {'yes' if 'cuda' in backends else 'no'}"
          f"{' (quick)' if quick else ''}")
    hdr = f"{'trace':<8} {'allocator':<24} {'allocs':>7} {'peak alloc':>11} {'peak resv':>11} {'resv/alloc':>10} " \
          f"{'us/pair':>8} {'hot us/pair':>11} {'dev allocs':>10}"
    print(hdr)
    print("-" * len(hdr))
    for trace in TRACES:
        for backend in backends:
            for mode in ("classic", "expandable"):
                if rows and f"{backend}:{mode}" not in rows:
                    continue
                r = run_child(backend, mode, trace, quick)
                name = f"{'torch.musa' if backend == 'musa' else 'torch.cuda'} {mode}"
                if "error" in r:
                    print(f"{trace:<8} {name:<24} ERROR {r['error']}")
                    continue
                ratio = r["peak_reserved"] / max(1, r["peak_allocated"])
                print(f"{trace:<8} {name:<24} {r['allocs']:>7} {r['peak_allocated'] / MiB:>9.0f}Mi "
                      f"{r['peak_reserved'] / MiB:>9.0f}Mi {ratio:>10.3f} {r['us_per_pair']:>8.2f} "
                      f"{r['hot_us_per_pair']:>11.2f} {r['device_allocs']:>10}", flush=True)


if __name__ == "__main__":
    main()
