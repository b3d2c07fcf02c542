"""torch.compile on musa against native torch.compile, in one run.

    TORCH_MUSA_DRIVER=cuda python bench/compile_bench.py [--rounds 3] [--quick]   # H200: musa vs cuda
    python bench/compile_bench.py --host [--rounds 3]                             # host driver vs CPU

GPU: compiled training-step tokens/s and compile time (first step's wall time) of the
GPT model of bench/gpu_bench.py (6 blocks, d_model 768, bf16 autocast, AdamW) and of HF
GPT-2 from its config, musa (cuda driver) against native cuda.
Host: compiled/eager speedup of a small GPT on the host driver against the same on CPU
tensors (the host driver's kernels are Inductor's CPU kernels).

Each side runs in its own child process, alternating round by round; the native side
never loads torch_musa (pytorch/pytorch#161129). Medians of the rounds are printed.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import GPT  # noqa: E402
from host_bench import median_time, sync as _sync  # noqa: E402


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


def measure_gpu(device, quick):
    import torch._dynamo

    rows = []
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
        for _ in range(2):
            step()
        sec = median_time(step, device, 5 if quick else 10, warmup=0)
        rows.append({"name": name, "tok_s": batch * 512 / sec, "compile_s": compile_s})
        del model, opt
        (torch.cuda if device == "cuda" else torch.musa).empty_cache()
    return rows


def measure_host(device):
    import torch._dynamo

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    torch.manual_seed(0)
    model = GPT(vocab=512, d=128, h=4, layers=2, seq=64).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randint(0, 512, (8, 65), device=device)
    eager = median_time(_train_step(model, opt, data, device, autocast=False), device, 10, warmup=0)
    torch._dynamo.reset()
    step = _train_step(torch.compile(model), opt, data, device, autocast=False)
    for _ in range(3):
        step()
    compiled = median_time(step, device, 10, warmup=0)
    return [{"name": "GPT 2x128 fp32 step (host)", "eager_s": eager, "compiled_s": compiled,
             "speedup": eager / compiled}]


def _child(side, args):
    env = dict(os.environ)
    cmd = [sys.executable, __file__, "--side", side] + (["--quick"] if args.quick else []) + \
        (["--host"] if args.host else [])
    if side == "native":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    else:
        env.setdefault("TORCH_MUSA_DRIVER", "host" if args.host else "cuda")
    child = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if child.returncode != 0:
        sys.exit(f"{side} side failed:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--host", action="store_true", help="host driver against CPU tensors")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--side", choices=["native", "musa"])
    args = ap.parse_args()
    if args.side:
        if args.side == "musa":
            import torch_musa  # noqa: F401
        else:
            sys.modules["torch_musa"] = None  # transformers would import it (and break native backward)
        native_device = "cpu" if args.host else "cuda"
        device = native_device if args.side == "native" else "musa"
        print(json.dumps(measure_host(device) if args.host else measure_gpu(device, args.quick)))
        return
    runs = {"native": [], "musa": []}
    for _ in range(args.rounds):
        for side in ("native", "musa"):
            runs[side].append(_child(side, args))
    med = lambda side, i, key: statistics.median(r[i][key] for r in runs[side])  # noqa: E731
    print(f"torch {torch.__version__}  ({args.rounds} alternating rounds per side, medians)")
    if args.host:
        print(f"\n{'benchmark':<30}{'CPU eager/compiled ms':>23}{'musa eager/compiled ms':>24}"
              f"{'CPU speedup':>13}{'musa speedup':>14}{'ratio':>8}{'goal':>8}")
        for i, row in enumerate(runs["native"][0]):
            n, m = med("native", i, "speedup"), med("musa", i, "speedup")
            times = {side: f"{med(side, i, 'eager_s') * 1e3:.1f} / {med(side, i, 'compiled_s') * 1e3:.1f}"
                     for side in ("native", "musa")}
            print(f"{row['name']:<30}{times['native']:>23}{times['musa']:>24}{n:>13.3f}{m:>14.3f}{m / n:>8.3f}"
                  f"{'>=0.90':>8}")
        return
    print(f"\n{'benchmark':<18}{'native tok/s':>14}{'musa tok/s':>13}{'ratio':>8}{'goal':>7}"
          f"{'native compile s':>18}{'musa compile s':>16}{'ratio':>8}{'goal':>7}")
    goals = {"GPT 6x768": 1.0, "HF GPT-2 6x768": 0.97}
    for i, row in enumerate(runs["native"][0]):
        nt, mt = med("native", i, "tok_s"), med("musa", i, "tok_s")
        nc, mc = med("native", i, "compile_s"), med("musa", i, "compile_s")
        print(f"{row['name']:<18}{nt:>14.4g}{mt:>13.4g}{mt / nt:>8.3f}{'>=' + format(goals[row['name']], '.2f'):>7}"
              f"{nc:>18.1f}{mc:>16.1f}{mc / nc:>8.2f}{'<=1.25':>7}")


if __name__ == "__main__":
    main()
