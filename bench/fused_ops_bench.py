"""torch_musa's fused LLM ops on musa against the same computation in native PyTorch ops, in one run.

    TORCH_MUSA_DRIVER=cuda python bench/fused_ops_bench.py [--rounds 3]    # GPU: Llama-7B shapes, bf16
    python bench/fused_ops_bench.py --rounds 3                            # no GPU: host driver vs CPU, small shapes

Each op runs forward+backward (bf16; Llama-7B: batch 2 x seq 4096, hidden 4096, 32 heads of 128,
intermediate 11008, vocab 32000). The native side is the unfused composition written with
torch ops (Megatron's RoPE, silu(a) * b, HF Llama's RMSNorm, F.cross_entropy) on cuda in eager;
F.rms_norm's own CUDA kernel is shown as an extra row. Each side runs in its own fresh child
process (the native one never loads torch_musa), alternating round by round; medians of the
rounds. The floor is 1.5x (native ms / musa ms).
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _sides import run_side  # noqa: E402

import torch  # noqa: E402  (the native child runs with TORCH_DEVICE_BACKEND_AUTOLOAD=0: no torch_musa)

GPU_SHAPES = dict(seq=4096, batch=2, hidden=4096, heads=32, head_dim=128, inter=11008, vocab=32000,
                  dtype="bfloat16")
HOST_SHAPES = dict(seq=128, batch=2, hidden=512, heads=8, head_dim=64, inter=1024, vocab=4096, dtype="float32")
FLOOR = 1.5


def _rotate_half(t):
    t1, t2 = t.chunk(2, dim=-1)
    return torch.cat((-t2, t1), dim=-1)


def native_rope(x, freq):  # Megatron's apply_rotary_pos_emb (sbhd)
    f = freq.reshape(freq.shape[0], 1, 1, freq.shape[-1])
    return x * f.cos().to(x.dtype) + _rotate_half(x) * f.sin().to(x.dtype)


def native_swiglu(x):
    a, b = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(a) * b


def native_rmsnorm(x, w, eps=1e-6):  # HF LlamaRMSNorm
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def cases(device, s, fused):
    import torch.nn.functional as F

    S, T, dt = s["seq"], s["seq"] * s["batch"], getattr(torch, s["dtype"])
    g = torch.Generator(device="cpu").manual_seed(0)

    def leaf(*shape):
        return torch.randn(*shape, generator=g).to(device, dt).requires_grad_()

    q = leaf(S, s["batch"], s["heads"], s["head_dim"])  # (seq, batch, heads, dim), as Megatron's
    freq = torch.randn(S, s["head_dim"], generator=g).to(device)
    x13 = leaf(T, 2 * s["inter"])
    xn, wn = leaf(T, s["hidden"]), torch.ones(s["hidden"], device=device, dtype=dt, requires_grad=True)
    logits, tgt = leaf(T, s["vocab"]), torch.randint(0, s["vocab"], (T,), generator=g).to(device)
    out = [
        ("rope", [q], (lambda: F.rope(q, freq)) if fused else (lambda: native_rope(q, freq))),
        ("swish_glu", [x13], (lambda: F.swish_glu(x13)) if fused else (lambda: native_swiglu(x13))),
        ("rms_norm", [xn, wn], (lambda: F.rms_norm(xn, (s["hidden"],), wn, 1e-6)) if fused
         else (lambda: native_rmsnorm(xn, wn))),
        ("cross_entropy", [logits], lambda: F.cross_entropy(logits, tgt)),
    ]
    if not fused:  # torch's own fused rms_norm kernel, for reference (not the floor's baseline)
        out.append(("rms_norm (F.rms_norm)", [xn, wn], lambda: F.rms_norm(xn, (s["hidden"],), wn, 1e-6)))
    return out


def measure(device, shapes, iters):
    sync = {"cuda": torch.cuda.synchronize, "cpu": lambda: None}.get(device, lambda: torch.musa.synchronize())
    res = {}
    for name, leaves, fn in cases(device, shapes, fused=device == "musa"):
        y = fn()
        grad = torch.randn_like(y)

        def step():
            fn().backward(grad)
            for t in leaves:
                t.grad = None

        for _ in range(3):
            step()
        sync()
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(iters):
                step()
            sync()
            samples.append((time.perf_counter() - t0) / iters)
        res[name] = statistics.median(samples) * 1e3
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--side", choices=["native", "musa"])
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    if args.side:
        if args.side == "native":
            sys.modules["torch_musa"] = None
        else:
            import torch_musa  # noqa: F401
        shapes = GPU_SHAPES if args.device in ("cuda", "musa-gpu") else HOST_SHAPES
        device = {"musa-gpu": "musa", "musa-host": "musa"}.get(args.device, args.device)
        print(json.dumps(measure(device, shapes, args.iters)))
        return
    _t = torch
    gpu = _t.cuda.is_available() and os.environ.get("TORCH_MUSA_DRIVER", "cuda") != "host"
    native_dev, musa_dev, driver = ("cuda", "musa-gpu", "cuda") if gpu else ("cpu", "musa-host", "host")
    runs = {"native": [], "musa": []}
    for _ in range(max(3, args.rounds)):
        for side, dev in (("native", native_dev), ("musa", musa_dev)):
            runs[side].append(run_side(__file__, side, ["--device", dev, "--iters", str(args.iters)],
                                       musa_driver=driver))
    shapes = GPU_SHAPES if gpu else HOST_SHAPES
    print(f"torch {_t.__version__}  fused LLM ops, forward+backward, {shapes}; "
          f"musa ({driver} driver) vs native {native_dev} eager ({len(runs['native'])} alternating rounds, medians)")
    print(f"\n{'op':<24}{'native ms':>11}{'musa ms':>10}{'speedup':>10}  floor {FLOOR}x")
    med = lambda side, k: statistics.median(r[k] for r in runs[side])  # noqa: E731
    for name in runs["native"][0]:
        base = name.split(" ")[0]
        n, m = med("native", name), med("musa", base)
        verdict = ("ok" if n / m >= FLOOR else "BELOW") if name == base else "(reference)"
        print(f"{name:<24}{n:>11.3f}{m:>10.3f}{n / m:>9.2f}x  {verdict}")
    print("\nspeedup = native ms / musa ms; native = the composition in torch ops (cross_entropy: F.cross_entropy)")


if __name__ == "__main__":
    main()
