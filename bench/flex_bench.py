"""Compiled flex_attention on musa (cuda driver) against native cuda, in one run.

    TORCH_MUSA_DRIVER=cuda python bench/flex_bench.py [--rounds 3] [--batch 2]

Causal block mask, seq 4096, 16 heads, head dim 64, bf16: torch.compile(flex_attention)
forward, and forward+backward. Each side runs in its own fresh child process, alternating
round by round; the native side never loads torch_musa. Medians of the rounds are printed.
Needs a CUDA GPU: elsewhere it says so and exits 0.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sides import run_side  # noqa: E402

SEQ, HEADS, HEAD_DIM = 4096, 16, 64


def measure(device, batch, iters=20):
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    sync = torch.cuda.synchronize if device == "cuda" else torch.musa.synchronize
    block_mask = create_block_mask(lambda b, h, q, kv: q >= kv, None, None, SEQ, SEQ, device=device)
    q, k, v = (torch.randn(batch, HEADS, SEQ, HEAD_DIM, device=device, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    grad = torch.randn(batch, HEADS, SEQ, HEAD_DIM, device=device, dtype=torch.bfloat16)
    attn = torch.compile(flex_attention)

    def forward():
        with torch.no_grad():
            attn(q, k, v, block_mask=block_mask)

    def forward_backward():
        attn(q, k, v, block_mask=block_mask).backward(grad)
        q.grad = k.grad = v.grad = None

    rows = []
    for name, fn in (("forward", forward), ("forward+backward", forward_backward)):
        t0 = time.perf_counter()
        fn()
        sync()
        compile_s = time.perf_counter() - t0
        for _ in range(3):
            fn()
        sync()
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            sync()
            samples.append(time.perf_counter() - t0)
        rows.append({"name": name, "ms": statistics.median(samples) * 1e3, "compile_s": compile_s})
    return rows


def _child(side, batch):
    return run_side(__file__, side, ["--batch", str(batch)], musa_driver="cuda")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=2, choices=[1, 2])
    ap.add_argument("--side", choices=["native", "musa"])
    args = ap.parse_args()
    if args.side == "musa":
        import torch_musa  # noqa: F401
    elif args.side == "native":
        sys.modules["torch_musa"] = None
    if args.side:
        print(json.dumps(measure("cuda" if args.side == "native" else "musa", args.batch)))
        return
    import torch

    if not torch.cuda.is_available():
        print("flex_bench: no CUDA device here; it compares musa (cuda driver) with native cuda on a GPU. Skipped.")
        return
    runs = {"native": [], "musa": []}
    for _ in range(max(3, args.rounds)):
        for side in ("native", "musa"):
            runs[side].append(_child(side, args.batch))
    med = lambda side, i, key: statistics.median(r[i][key] for r in runs[side])  # noqa: E731
    print(f"torch {torch.__version__}  flex_attention causal, batch {args.batch}, seq {SEQ}, {HEADS} heads, "
          f"d {HEAD_DIM}, bf16, compiled ({len(runs['native'])} alternating rounds per side, medians)")
    print(f"\n{'pass':<18}{'native ms':>11}{'musa ms':>10}{'speed ratio':>13}{'native compile s':>18}"
          f"{'musa compile s':>16}")
    for i, row in enumerate(runs["native"][0]):
        n, m = med("native", i, "ms"), med("musa", i, "ms")
        print(f"{row['name']:<18}{n:>11.3f}{m:>10.3f}{n / m:>13.3f}{med('native', i, 'compile_s'):>18.1f}"
              f"{med('musa', i, 'compile_s'):>16.1f}")
    print("\nspeed ratio = native ms / musa ms (1.0: musa as fast as native cuda)")


if __name__ == "__main__":
    main()
