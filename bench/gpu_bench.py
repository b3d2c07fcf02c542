"""musa (cuda driver) vs native torch.cuda on the same GPU, in one run.

    TORCH_MUSA_DRIVER=cuda python bench/gpu_bench.py [--quick]

Prints a table of native and musa figures and their ratio (musa / native for
throughput, native / musa for latency, so >= 1.0 means musa is at least as fast).

Each side runs in its own child process, alternating round by round; the
native one never loads torch_musa: once any PrivateUse1 backend is
registered, torch's autograd engine rejects CUDA backward passes in that
process (pytorch/pytorch#161129).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn


def timed(fn, device, iters, warmup=3, reps=1):
    """Median over `iters` of the device time of `reps` calls queued back to back, per call (ms)."""
    mod = torch.cuda if device == "cuda" else torch.musa
    for _ in range(warmup):
        fn()
    mod.synchronize()
    times = []
    for _ in range(iters):
        start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times)  # ms


def bench_matmul(device, n=8192, iters=20):
    g = torch.Generator().manual_seed(0)
    # several operand sets so repeated products don't just hit the cache
    sets = [(torch.randn(n, n, generator=g).to(device, torch.bfloat16),
             torch.randn(n, n, generator=g).to(device, torch.bfloat16)) for _ in range(2)]
    i = [0]

    def step():
        a, b = sets[i[0] % 2]
        i[0] += 1
        a @ b
    ms = timed(step, device, iters)
    return 2 * n**3 / (ms / 1e3) / 1e12  # TFLOP/s


def bench_copy(device, nbytes=2 << 30, iters=20):
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), device, iters)
    return 2 * nbytes / (ms / 1e3) / 1e12  # TB/s, bytes read + written


def bench_tiny_chain(device, n_ops=200, iters=20):
    x = torch.randn(256, device=device)

    def chain():
        y = x
        for _ in range(n_ops // 2):
            y = y * 1.0001
            y = y + 0.0001
        return y
    mod = torch.cuda if device == "cuda" else torch.musa
    for _ in range(3):
        chain()
    mod.synchronize()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        chain()
        mod.synchronize()
        samples.append((time.perf_counter() - t0) / n_ops * 1e6)
    return statistics.median(samples)  # us per op


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        a = self.ln1(x)
        x = x + self.attn(a, a, a, attn_mask=mask, need_weights=False, is_causal=True)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=8192, d=768, h=12, layers=6, seq=512):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=idx.device), 1)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def bench_gpt(device, batch=16, seq=512, iters=10, reps=1):
    torch.manual_seed(0)
    model = GPT(seq=seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, 8192, (batch, seq + 1), device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = model(data[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), data[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    ms = timed(step, device, iters, warmup=3, reps=reps)
    return batch * seq / (ms / 1e3)  # tokens/s


def rows(q):
    return [
        # one step at a time from an idle device (adds the host's latency to the first kernels), and
        # 10 steps queued back to back, as a training loop runs them
        ("GPT 6x768 bf16 AdamW step", "tokens/s", lambda d: bench_gpt(d, iters=5 if q else 10), True, 0.97),
        ("GPT step, 10 back to back", "tokens/s", lambda d: bench_gpt(d, iters=3 if q else 5, reps=10), True, 0.97),
        ("bf16 matmul 8192^3", "TFLOP/s", lambda d: bench_matmul(d, iters=10 if q else 20), True, 0.98),
        ("200 tiny elementwise ops", "us/op", lambda d: bench_tiny_chain(d), False, 1 / 1.2),
        ("D2D copy 2 GiB", "TB/s", lambda d: bench_copy(d), True, 0.95),
    ]


def measure(device, q):
    out = []
    for _, _, fn, _, _ in rows(q):
        out.append(fn(device))
        (torch.cuda if device == "cuda" else torch.musa).empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--side", choices=["native", "musa", "both"], default="both")
    ap.add_argument("--rounds", type=int, default=3, help="alternating native/musa rounds (child processes)")
    args = ap.parse_args()
    q = args.quick
    if args.side in ("native", "musa"):
        if args.side == "musa":
            import torch_musa  # noqa: F401  (explicit, in case autoload is off)
        print(json.dumps(measure("cuda" if args.side == "native" else "musa", q)))
        return
    # Both sides run in fresh child processes, alternating round by round, so
    # clock, thermal and machine-load drift hit both alike and neither side
    # inherits the other's process state.
    envs = {"native": dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"), "musa": dict(os.environ)}
    runs = {"native": [], "musa": []}
    for _ in range(args.rounds):
        for side in ("native", "musa"):
            child = subprocess.run([sys.executable, __file__, "--side", side] + (["--quick"] if q else []),
                                   env=envs[side], capture_output=True, text=True)
            if child.returncode != 0:
                sys.exit(f"{side} side failed:\n{child.stderr[-2000:]}")
            runs[side].append(json.loads(child.stdout.strip().splitlines()[-1]))
    higher = [r[3] for r in rows(q)]
    best = lambda rs: [(max if h else min)(r[i] for r in rs) for i, h in enumerate(higher)]  # noqa: E731
    median = lambda rs: [statistics.median(r[i] for r in rs) for i in range(len(higher))]  # noqa: E731
    import torch_musa  # noqa: F401
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}  musa driver: {torch.musa.get_driver_name()}"
          f"  ({args.rounds} rounds per side)")
    print(f"\n{'benchmark':<28}{'unit':>10}{'native cuda':>14}{'musa':>14}{'ratio':>8}{'median':>8}{'goal':>8}")
    for (name, unit, _, hb, floor), nb, mb, nm, mm in zip(rows(q), best(runs["native"]), best(runs["musa"]),
                                                          median(runs["native"]), median(runs["musa"])):
        ratio = mb / nb if hb else nb / mb
        mratio = mm / nm if hb else nm / mm
        print(f"{name:<28}{unit:>10}{nb:>14.4g}{mb:>14.4g}{ratio:>8.3f}{mratio:>8.3f}{'>=' + format(floor, '.2f'):>8}")
    print("\nratio: best round of each side; median: median round of each side.")


if __name__ == "__main__":
    main()
