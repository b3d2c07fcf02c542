"""torch.compile on musa against native torch.compile, in one run.

    TORCH_MUSA_DRIVER=cuda python bench/compile_bench.py [--rounds 3] [--quick] [--cold] [--cells decode,aoti|all]
    python bench/compile_bench.py --host [--rounds 3] [--quick] [--cold] [--cells ...]   # host driver vs CPU

Cells (`--cells`, comma-separated or `all`; default `train`, what bench/gpu_suite.sh's compile step
runs; each cell's table prints as soon as its rounds end, so a cut-off run keeps the finished ones):
  train   GPU: compiled training-step tokens/s and compile time (first step's wall time) of the GPT
          model of bench/gpu_bench.py (6 blocks, d_model 768, bf16 autocast, AdamW) and of HF GPT-2
          from its config; tokens/s of steps queued back to back as a training loop runs them, and of
          one step at a time from an idle device. Host: compiled/eager speedup of a small GPT step.
  decode  One-token decode steps of that GPT (batch 1, bf16 on the GPU) over a static KV cache (module
          buffers of the maximum length written in place at the position, given as a tensor), under
          torch.compile(mode="reduce-overhead"): tokens/s, graph replays per timed call (counted on
          CUDAGraph / MUSAGraph.replay; 1.00 = every call replays), cudagraph skips, and whether the
          compiled tokens equal eager's. Host: compiled/eager speedup; native CPU has no CUDA graphs,
          so there reduce-overhead is plain compiled code while musa replays MUSA Graph host tasks.
  cold    What a fresh process pays (always cold caches, see --cold): `import torch` (autoloading
          torch_musa on the musa side), the first op, and for a tiny MLP forward and a tiny GPT training
          step (2 blocks, d_model 64, fp32, compiled model, eager loss and AdamW) the first call's wall
          time and main-process CPU time (which leaves out compiler child processes: gcc, Triton
          workers), then the steady step's wall time and main-thread CPU time.
  aoti    torch.export of the GPT in eval mode (batch 8 x seq 128 on the GPU), compiled with
          torch._inductor.aoti_compile_and_package into a temporary directory, loaded with
          aoti_load_package: inference latency (and the package's compile time, its max error
          against eager). Each side compiles its package once, in its first round; every round
          loads it in a fresh process and times it. A side that fails prints its error's first
          line in the table.
--quick shortens the timed loops and the decode run (GPU: cache 128 and 32 tokens a loop instead of
512 and 128); --rounds sets the alternating rounds. --cold gives every child process (each side, each
round) its own empty Inductor and Triton cache directories, so every compile time is a cold one. On an H100 the aoti cell takes about 6.5 minutes
(two cold GPT package compiles, then six loads), so give it its own 10-minute device call:
    TORCH_MUSA_DRIVER=cuda timeout 590 python3 bench/compile_bench.py --cells aoti --rounds 3

Each cell of each side runs in its own child process, alternating native/musa round by round;
the native side never loads torch_musa (pytorch/pytorch#161129). Medians of the rounds are printed.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

_T0 = time.perf_counter()
import torch  # noqa: E402  (the cold cell times this import: it autoloads torch_musa on the musa side)

_IMPORT_S = time.perf_counter() - _T0
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sides import run_side  # noqa: E402
from gpu_bench import GPT  # noqa: E402
from host_bench import median_time, sync as _sync  # noqa: E402

CELLS = ("train", "decode", "aoti", "cold")


def _empty_cache(device):
    if device in ("cuda", "musa"):
        getattr(torch, device).empty_cache()


def _small_gpt(seq=64):
    return GPT(vocab=512, d=128, h=4, layers=2, seq=seq)


def _train_step(model, opt, data, device, autocast):
    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            out = model(data[:, :-1])
            logits = out.logits if hasattr(out, "logits") else out
            loss = nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), data[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def _gpt2(vocab):
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=512, n_embd=768, n_layer=6, n_head=12))


def train_gpu(device, quick):
    import torch._dynamo

    from torch._dynamo.utils import counters

    rows = []
    counters.clear()
    for name, make, batch in (("GPT 6x768", lambda: GPT(seq=512), 16), ("HF GPT-2 6x768", lambda: _gpt2(8192), 16)):
        torch.manual_seed(0)
        torch._dynamo.reset()
        model = make().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        data = torch.randint(0, 8192, (batch, 513), device=device)
        step = _train_step(torch.compile(model), opt, data, device, autocast=True)
        t0 = time.perf_counter()
        step()
        _sync(device)
        compile_s = time.perf_counter() - t0
        # whether the first step compiled or found its graphs in the FX-graph cache (shared across processes)
        fx_cache = {k.replace("fxgraph_cache_", ""): v for k, v in counters["inductor"].items() if "fxgraph_cache" in k}
        for _ in range(2):
            step()
        # A training loop's throughput: steps queued back to back, one synchronize per 10 steps.
        sec = median_time(step, device, 5 if quick else 10, warmup=0, reps=10)
        # One step from an idle device to its end: adds the host's latency to the first kernels.
        synced = median_time(step, device, 5 if quick else 10, warmup=0)
        # musa: how many of the step's graphs ran as CUDA graphs, and why others kept musa's path
        paths = dict(counters.get("torch_musa", {}))
        counters.clear()
        rows.append({"name": name, "tok_s": batch * 512 / sec, "synced_tok_s": batch * 512 / synced,
                     "compile_s": compile_s, "fx_cache": fx_cache, "graph_paths": paths})
        del model, opt
        _empty_cache(device)
    return rows


def train_host(device, quick):
    import torch._dynamo

    torch.manual_seed(0)
    model = _small_gpt().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, 512, (8, 65), device=device)
    eager = median_time(_train_step(model, opt, data, device, autocast=False), device, 10, warmup=0)
    torch._dynamo.reset()
    step = _train_step(torch.compile(model), opt, data, device, autocast=False)
    for _ in range(3):
        step()
    compiled = median_time(step, device, 10, warmup=0)
    return [{"name": "GPT 2x128 fp32 step", "eager_s": eager, "compiled_s": compiled}]


class StaticKVDecoder(nn.Module):
    """One-token decode through a GPT's weights over a static KV cache: the cache is module
    buffers of the maximum length (static inputs for graph trees), written in place at `pos`
    (a 1-element tensor), and attention masks the positions after it, so every call has the
    same shapes and one recorded graph replays for all positions."""

    def __init__(self, gpt, max_len, batch=1):
        super().__init__()
        self.gpt = gpt
        attn = gpt.blocks[0].attn
        self.heads, self.head_dim = attn.num_heads, attn.embed_dim // attn.num_heads
        p = gpt.head.weight
        shape = (len(gpt.blocks), batch, self.heads, max_len, self.head_dim)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=p.dtype, device=p.device))
        self.register_buffer("v_cache", torch.zeros(shape, dtype=p.dtype, device=p.device))
        self.register_buffer("slots", torch.arange(max_len, device=p.device))

    def forward(self, tok, pos):  # tok (batch, 1) int64, pos (1,) int64; returns the next token (batch, 1)
        g, b = self.gpt, tok.shape[0]
        x = g.tok(tok) + g.pos(pos)
        mask = (self.slots <= pos).view(1, 1, 1, -1)
        for i, blk in enumerate(g.blocks):
            qkv = F.linear(blk.ln1(x), blk.attn.in_proj_weight, blk.attn.in_proj_bias)
            q, k, v = qkv.view(b, 1, 3, self.heads, self.head_dim).transpose(1, 3).unbind(2)  # (b, h, 1, hd)
            self.k_cache[i].index_copy_(2, pos, k)
            self.v_cache[i].index_copy_(2, pos, v)
            o = F.scaled_dot_product_attention(q, self.k_cache[i], self.v_cache[i], attn_mask=mask)
            x = x + blk.attn.out_proj(o.transpose(1, 2).reshape(b, 1, -1))
            x = x + blk.mlp(blk.ln2(x))
        return g.head(g.ln(x)).argmax(-1)


def _count_replays(device):
    """Counts graph replays (graph trees call .replay() on these classes); None where there are none."""
    if device not in ("cuda", "musa"):
        return None  # native CPU: no graphs
    cls = torch.cuda.CUDAGraph if device == "cuda" else torch.musa.MUSAGraph
    counter, replay = [0], cls.replay

    def counted(self):
        counter[0] += 1
        return replay(self)
    cls.replay = counted
    return counter


def decode(device, quick, host):
    import torch._dynamo

    torch.manual_seed(0)
    max_len, n_tok = (64, 16) if host else (128 if quick else 512, 32 if quick else 128)
    gpt = (_small_gpt(max_len) if host else GPT(seq=max_len).to(dtype=torch.bfloat16)).to(device).eval()
    dec = StaticKVDecoder(gpt, max_len)
    slots = torch.arange(max_len, device=device)
    replays = _count_replays(device)

    def generate(step, mark):
        def run():
            toks = [torch.zeros(1, 1, dtype=torch.long, device=device)]
            for i in range(n_tok):
                if mark:
                    torch.compiler.cudagraph_mark_step_begin()
                toks.append(step(toks[-1], slots[i:i + 1]).clone())  # a replay overwrites the graph's outputs
            return torch.cat(toks[1:])
        return run

    with torch.no_grad():
        eager_toks = generate(dec, False)()
        eager = median_time(generate(dec, False), device, 3 if quick else 5, warmup=1)
        torch._dynamo.reset()
        run = generate(torch.compile(dec, mode="reduce-overhead"), True)
        t0 = time.perf_counter()
        agree = (run() == eager_toks).float().mean().item()  # n_tok >= 3 calls: warm-up, recording, replays
        compile_s = time.perf_counter() - t0
        before = replays[0] if replays else 0
        iters = 3 if quick else 5
        compiled = median_time(run, device, iters, warmup=1)
    from torch._dynamo.utils import counters

    row = {"name": ("GPT 2x128 fp32" if host else "GPT 6x768 bf16") + f" decode b1 L{max_len}",
           "tok_s": n_tok / compiled, "eager_tok_s": n_tok / eager, "compile_s": compile_s, "eager_agree": agree,
           "replays_per_call": (replays[0] - before) / ((iters + 1) * n_tok) if replays else None,
           "cudagraph_skips": counters["inductor"]["cudagraph_skips"]}
    return [row]


_AOTI_DIR = "COMPILE_BENCH_AOTI_DIR"


def _libstdcxx_global():
    """On the GPU machines (g++ 13, torch 2.11) ``aoti_load_package`` dies with SIGSEGV in a
    process without torch_musa, for CPU and CUDA packages alike, unless libstdc++ is in the global
    symbol scope first (tried alone on an H100, torch_musa hidden: the package then loads and
    matches eager). torch_musa's import does that (torch_musa/__init__.py says why), so the native
    side does it too: both sides then load their packages alike."""
    import ctypes

    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass


def aoti(device, quick, host):
    torch.manual_seed(0)
    _libstdcxx_global()
    if host:
        model, x = _small_gpt(), torch.randint(0, 512, (2, 64), device=device)
    else:
        model, x = GPT(seq=128), torch.randint(0, 8192, (8, 128), device=device)
    model = model.to(device).eval()
    name = ("GPT 2x128 fp32 b2x64" if host else "GPT 6x768 fp32 b8x128") + " AOTI"
    iters = 10 if quick else 30
    with torch.no_grad():
        want = model(x)
        eager = median_time(lambda: model(x), device, iters)
    # A side compiles its package in its first round; later rounds (fresh processes) load that
    # package and time it (the parent names the directory): latency rounds cost no compile.
    shared = os.environ.get(_AOTI_DIR)
    compile_s = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(shared or tmp, f"gpt_{torch.device(device).type}.pt2")
            if not os.path.exists(path):
                t0 = time.perf_counter()
                ep = torch.export.export(model, (x,))
                path = torch._inductor.aoti_compile_and_package(ep, package_path=path)
                compile_s = time.perf_counter() - t0
            runner = torch._inductor.aoti_load_package(path)
            got = runner(x)
            got = got[0] if isinstance(got, (list, tuple)) else got
            sec = median_time(lambda: runner(x), device, iters)
    except Exception as e:  # noqa: BLE001 -- a failing side is reported in the table, not fatal
        return [{"name": name, "error": f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:160]}"}]
    return [{"name": name, "latency_ms": sec * 1e3, "eager_ms": eager * 1e3, "compile_s": compile_s,
             "max_err": (got.float() - want.float()).abs().max().item()}]


def _first_and_steady(step, device, reps):
    """(first call's wall s, its main-process CPU s, steady wall s per call, main-thread CPU s per call)."""
    c0, t0 = time.process_time(), time.perf_counter()
    step()
    _sync(device)
    first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
    for _ in range(3):
        step()
    cpu = []

    def timed():  # reps calls per sample; the sample's thread CPU time rides along
        c = time.thread_time()
        step()
        cpu.append(time.thread_time() - c)
    wall = median_time(timed, device, 7, warmup=0, reps=reps)
    return first, first_cpu, wall, statistics.median(cpu)


def cold(device, quick, host):
    """Import, first op, first compiled call and steady compiled step of a tiny MLP and GPT step."""
    import torch._dynamo

    t0 = time.perf_counter()
    torch.ones(4, device=device).add_(1)
    _sync(device)
    rows = [{"name": "import torch", "s": _IMPORT_S}, {"name": "first op", "s": time.perf_counter() - t0}]
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64)).to(device)
    x = torch.randn(8, 64, device=device)
    compiled = torch.compile(mlp)
    rows.append(dict(zip(("compile_s", "compile_cpu_s", "step_s", "step_cpu_s"),
                         _first_and_steady(lambda: compiled(x), device, 100 if quick else 300)), name="tiny MLP fwd"))
    torch._dynamo.reset()
    torch.manual_seed(0)
    gpt = GPT(vocab=256, d=64, h=2, layers=2, seq=32).to(device)
    opt = torch.optim.AdamW(gpt.parameters(), lr=1e-4)
    data = torch.randint(0, 256, (4, 33), device=device)
    step = _train_step(torch.compile(gpt), opt, data, device, autocast=False)
    rows.append(dict(zip(("compile_s", "compile_cpu_s", "step_s", "step_cpu_s"),
                         _first_and_steady(step, device, 5 if quick else 20)), name="tiny GPT train step"))
    return rows


def measure(cell, device, quick, host):
    if cell == "train":
        return (train_host if host else train_gpu)(device, quick)
    return {"decode": decode, "aoti": aoti, "cold": cold}[cell](device, quick, host)


def _side(cell, side, args):
    """One cell on one side in a fresh process; a side that dies becomes an error row."""
    argv = ["--cells", cell] + (["--quick"] if args.quick else []) + (["--host"] if args.host else [])
    try:
        if not (args.cold or cell == "cold"):
            return run_side(__file__, side, argv, musa_driver="host" if args.host else "cuda")
        with tempfile.TemporaryDirectory(prefix="compile_bench_cold_") as tmp:  # empty caches, this child only
            caches = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
                      "TRITON_CACHE_DIR": os.path.join(tmp, "triton")}
            return run_side(__file__, side, argv, musa_driver="host" if args.host else "cuda", extra_env=caches)
    except SystemExit as e:
        lines = [ln for ln in str(e.code).splitlines() if ln.strip()]
        # a crash names its signal and frame on the first line; an exception its message on the last
        why = lines[0] if lines and "killed by" in lines[0] else (lines[-1] if lines else "?")
        return [{"name": cell, "error": f"{side} process failed: {why[:200]}"}]


def _med(rounds, i, key):
    vals = [r[i][key] for r in rounds if i < len(r) and r[i].get(key) is not None]
    return statistics.median(vals) if vals else None


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def _error(runs, i):
    """The first round's error of each failing side, with the other side's figure where it has one."""
    firsts = {side: runs[side][0][i] if i < len(runs[side][0]) else {} for side in runs}
    if not any("error" in f for f in firsts.values()):
        return ""
    parts = []
    for side, first in firsts.items():
        key = next((k for k in ("tok_s", "latency_ms") if k in first), None)
        if "error" in first:
            parts.append(f"{side}: {first['error']}")
        elif key:
            parts.append(f"{side} {key} {_med(runs[side], i, key):.4g}")
    return "; ".join(parts)


def _train_host_row(name, med):
    speedup = {s: med(s, "eager_s") / med(s, "compiled_s") for s in ("native", "musa")}
    times = {s: f"{med(s, 'eager_s') * 1e3:.1f} / {med(s, 'compiled_s') * 1e3:.1f}" for s in speedup}
    return (f"{name:<30}{times['native']:>23}{times['musa']:>24}{speedup['native']:>13.3f}{speedup['musa']:>14.3f}"
            f"{speedup['musa'] / speedup['native']:>8.3f}{'>=0.90':>8}")


def _train_row(name, med):
    nt, mt, nc, mc = med("native", "tok_s"), med("musa", "tok_s"), med("native", "compile_s"), med("musa", "compile_s")
    ns, ms = med("native", "synced_tok_s"), med("musa", "synced_tok_s")
    # issue #29's floors: compiled tokens/s >= 1.0x native's, compile time <= 1.10x
    return (f"{name:<30}{nt:>14.4g}{mt:>13.4g}{mt / nt:>8.3f}{'>=1.00':>7}"
            f"{nc:>18.1f}{mc:>16.1f}{mc / nc:>8.2f}{'<=1.10':>7}{ns:>14.4g}{ms:>13.4g}{ms / ns:>8.3f}")


def _decode_row(name, med, host):
    # GPU: reduce-overhead tokens/s against native's; host: compiled/eager speedup against native CPU's
    score, text = {}, {}
    for s in ("native", "musa"):
        tok, eager = med(s, "tok_s"), med(s, "eager_tok_s")
        score[s], text[s] = (tok / eager, f"{tok:.4g} / {eager:.4g}") if host else (tok, f"{tok:.4g}")
    both = lambda key, spec: "/".join(_fmt(med(s, key), spec) for s in ("native", "musa"))  # noqa: E731
    return (f"{name:<30}{text['native']:>24}{text['musa']:>22}{score['musa'] / score['native']:>8.3f}"
            f"{'>=0.90' if host else '>=0.97':>7}{both('replays_per_call', '.2f'):>18}"
            f"{both('cudagraph_skips', '.0f'):>8}{both('eager_agree', '.2f'):>12}")


def _aoti_row(name, med):
    lat = {s: f"{med(s, 'latency_ms'):.3g} ({med(s, 'eager_ms'):.3g})" for s in ("native", "musa")}
    ratio = med("native", "latency_ms") / med("musa", "latency_ms")
    return (f"{name:<30}{lat['native']:>20}{lat['musa']:>18}{ratio:>8.3f}"
            f"{'>=0.97':>7}{med('native', 'compile_s'):>10.0f} / {med('musa', 'compile_s'):<5.0f}"
            f"{med('native', 'max_err'):>10.1e} / {med('musa', 'max_err'):.1e}")


def _cold_row(name, med):
    def pair(key, scale, spec):
        n, m = med("native", key), med("musa", key)
        return f"{n * scale:>{spec}}{m * scale:>{spec}}{m / n:>8.2f}"
    if med("native", "s") is not None:  # import, first op: one time each
        unit, scale = ("s", 1) if name.startswith("import") else ("ms", 1e3)
        return f"{name + f' ({unit})':<30}{pair('s', scale, '10.3g')}"
    step_unit, step_scale = ("ms", 1e3) if med("native", "step_s") > 2e-3 else ("us", 1e6)
    return (f"{name:<30}{pair('compile_s', 1, '10.3g')}{pair('compile_cpu_s', 1, '10.3g')}"
            f"   {step_unit:<3}{pair('step_s', step_scale, '10.4g')}{pair('step_cpu_s', step_scale, '10.4g')}")


def report(cell, runs, host):
    header = {
        ("train", True): f"{'CPU eager/compiled ms':>23}{'musa eager/compiled ms':>24}{'CPU speedup':>13}"
                         f"{'musa speedup':>14}{'ratio':>8}{'goal':>8}",
        ("train", False): f"{'native tok/s':>14}{'musa tok/s':>13}{'ratio':>8}{'goal':>7}{'native compile s':>18}"
                          f"{'musa compile s':>16}{'ratio':>8}{'goal':>7}{'synced native':>14}{'synced musa':>13}"
                          f"{'ratio':>8}",
        ("decode", True): f"{'CPU compiled/eager':>24}{'musa compiled/eager':>22}{'ratio':>8}{'goal':>7}"
                          f"{'replays/call':>18}{'skips':>8}{'= eager':>12}",
        ("decode", False): f"{'native tok/s':>24}{'musa tok/s':>22}{'ratio':>8}{'goal':>7}"
                           f"{'replays/call':>18}{'skips':>8}{'= eager':>12}",
        ("aoti", True): f"{'CPU ms (eager)':>20}{'musa ms (eager)':>18}{'ratio':>8}{'goal':>7}"
                        f"{'compile s':>18}{'max err vs eager':>20}",
        ("cold", True): f"{'CPU':>10}{'musa':>10}{'ratio':>8}{'CPU cpu':>10}{'musa cpu':>10}{'ratio':>8}"
                        f"      {'CPU':>10}{'musa':>10}{'ratio':>8}{'CPU cpu':>10}{'musa cpu':>10}{'ratio':>8}",
        ("cold", False): f"{'native':>10}{'musa':>10}{'ratio':>8}{'nat. cpu':>10}{'musa cpu':>10}{'ratio':>8}"
                         f"      {'native':>10}{'musa':>10}{'ratio':>8}{'nat. cpu':>10}{'musa cpu':>10}{'ratio':>8}",
        ("aoti", False): f"{'native ms (eager)':>20}{'musa ms (eager)':>18}{'ratio':>8}{'goal':>7}"
                         f"{'compile s':>18}{'max err vs eager':>20}",
    }[cell, host]
    print(f"\n{cell + (' (host)' if host else ''):<30}{header}")
    for i, row in enumerate(max(runs["native"][0], runs["musa"][0], key=len)):
        err = _error(runs, i)
        med = lambda side, key: _med(runs[side], i, key)  # noqa: E731,B023
        if err:
            print(f"{row['name']:<30}  {err}")
        elif cell == "train":
            print((_train_host_row if host else _train_row)(row["name"], med))
            paths = runs["musa"][0][i].get("graph_paths") if i < len(runs["musa"][0]) else None
            if paths:  # the first round's: which of musa's graphs ran as kernel-device graphs
                print(f"{'':<32}musa graphs: " + ", ".join(f"{k} {v}" for k, v in sorted(paths.items())))
            if not host:  # compile time round by round, with the FX-graph cache's hits and misses
                print(f"{'':<32}compile s by round (FX cache): " + "; ".join(
                    f"{side} " + " ".join(f"{r[i]['compile_s']:.1f}" + "({})".format(
                        ",".join(f"{k} {v}" for k, v in sorted(r[i].get("fx_cache", {}).items())))
                        for r in runs[side] if i < len(r) and "compile_s" in r[i]) for side in ("native", "musa")))
        elif cell == "decode":
            print(_decode_row(row["name"], med, host))
        elif cell == "cold":
            print(_cold_row(row["name"], med))
        else:
            print(_aoti_row(row["name"], med))
    notes = {
        "train": "  tok/s of steps queued back to back (10 per synchronize); compile s = first step's wall time;"
                 " synced = one step at a time, each from an idle device to its end." if not host else "",
        "decode": "  tok/s of batch-1 decode; replays/call, skips (cudagraph_skips) and '= eager' (share of tokens "
                  "equal to eager's) per side native/musa." + (
                      " Host: native CPU has no CUDA graphs (reduce-overhead there is plain compiled code);"
                      " musa replays MUSA Graph host tasks; ratio = musa's compiled/eager speedup over native's."
                      if host else ""),
        "cold": "  ratio = musa / native (time: above 1, musa costs more). First call (compile): wall s, then main-process CPU s (compiler child processes left out); "
                "steady step: wall per call, then main-thread CPU per call; import and first op: wall. "
                "Every child process starts with empty Inductor and Triton caches.",
        "aoti": "  latency of the loaded package (eager latency in parentheses); ratio = native/musa latency; "
                "compile s = export + aoti_compile_and_package in the first round, native / musa.",
    }
    if notes.get(cell):
        print(notes[cell])
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter timed loops and decode cache")
    ap.add_argument("--host", action="store_true", help="host driver against CPU tensors")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="empty Inductor/Triton caches for every child process")
    # train only by default: gpu_suite.sh's compile step runs the default within its time limit
    ap.add_argument("--cells", default="train", help=f"comma-separated subset of {','.join(CELLS)}, or all")
    ap.add_argument("--side", choices=["native", "musa"])
    args = ap.parse_args()
    cells = list(CELLS) if args.cells == "all" else [c.strip() for c in args.cells.split(",") if c.strip()]
    unknown = sorted(set(cells) - set(CELLS))
    if unknown:
        ap.error(f"unknown cell(s) {unknown}: choose from {','.join(CELLS)}")
    if args.side:
        if args.side == "musa":
            import torch_musa  # noqa: F401
        else:
            sys.modules["torch_musa"] = None  # transformers would import it (and break native backward)
        if args.host:
            # One thread for the latency-bound tiny decode/AOTI models: extra threads only add
            # oversubscription noise on a shared machine.
            torch.set_num_threads(max(1, os.cpu_count() or 1) if cells[0] == "train" else 1)
        device = "musa" if args.side == "musa" else ("cpu" if args.host else "cuda")
        print(json.dumps(measure(cells[0], device, args.quick, args.host)))
        return
    print(f"torch {torch.__version__}  ({args.rounds} alternating rounds per side, medians; ratio >= 1 means "
          "musa is at least as fast, except in the cold cell, whose ratios are musa's time over native's)")
    for cell in cells:
        runs = {"native": [], "musa": []}
        with tempfile.TemporaryDirectory() as packages:
            os.environ[_AOTI_DIR] = packages  # the aoti cell's packages, kept across its rounds
            for _ in range(args.rounds):
                for side in runs:
                    runs[side].append(_side(cell, side, args))
        report(cell, runs, args.host)


if __name__ == "__main__":
    main()
