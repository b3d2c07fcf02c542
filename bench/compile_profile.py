"""Where a compiled GPT training step spends host time: step time, main-thread CPU per step,
graph count, cProfile top 18; with --first, the first step (the compile, empty caches) instead.

    TORCH_MUSA_DRIVER=cuda python bench/compile_profile.py musa [--first]
    python bench/compile_profile.py native [--first]
    python bench/compile_profile.py musa --host [--first]     # host driver; native: CPU tensors

GPU: the GPT 6x768 bf16 step of bench/gpu_bench.py (batch 16 x 512). Host: a GPT 2x128 fp32
step (batch 8 x 64), one thread. --first also lists torch_musa's own functions by cumulative
time: the musa-only part of a first step. Run the two sides in separate processes (native never
loads torch_musa: pytorch/pytorch#161129).
"""
import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("side", choices=["musa", "native"])
ap.add_argument("--host", action="store_true", help="host driver (native: CPU tensors)")
ap.add_argument("--first", action="store_true", help="profile the first step (compile, empty caches)")
ap.add_argument("--top", type=int, default=18)
ap.add_argument("--dump", help="also write the profile to this pstats file (compare sides with pstats)")
args = ap.parse_args()
if args.side == "native":
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    sys.modules["torch_musa"] = None
if args.first:  # a cold compile: empty Inductor and Triton caches for this process
    tmp = tempfile.mkdtemp(prefix="compile_profile_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"], os.environ["TRITON_CACHE_DIR"] = f"{tmp}/inductor", f"{tmp}/triton"

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import GPT  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

dev = "musa" if args.side == "musa" else ("cpu" if args.host else "cuda")
sync = {"musa": lambda: torch.musa.synchronize(), "cuda": lambda: torch.cuda.synchronize()}.get(dev, lambda: None)
torch.manual_seed(0)
if args.host:
    torch.set_num_threads(1)
    model, batch, seq, vocab = GPT(vocab=512, d=128, h=4, layers=2, seq=64), 8, 64, 512
else:
    model, batch, seq, vocab = GPT(seq=512), 16, 512, 8192
model = model.to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
cm = torch.compile(model)
data = torch.randint(0, vocab, (batch, seq + 1), device=dev)


def step():
    with torch.autocast(dev, dtype=torch.bfloat16, enabled=not args.host):
        logits = cm(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), data[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


pr = cProfile.Profile()
if args.first:
    t0, c0 = time.perf_counter(), time.process_time()
    pr.enable()
    step()
    sync()
    pr.disable()
    print(f"{args.side} first step s {time.perf_counter() - t0:.2f} (main-process CPU {time.process_time() - c0:.2f}, "
          f"under cProfile)")
else:
    for _ in range(3):
        step()
    sync()
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(5):
        step()
    sync()
    t_all, c_all = (time.perf_counter() - t0) / 5, (time.thread_time() - c0) / 5
    pr.enable()  # host time of issuing 3 steps, without waiting for the device
    for _ in range(3):
        step()
    pr.disable()
    sync()
    print(f"{args.side} step ms {t_all * 1e3:.2f} main-thread CPU ms {c_all * 1e3:.2f}")
print("graphs", dict(counters["stats"]), "breaks", sum(counters["graph_break"].values()),
      "musa paths", dict(counters.get("torch_musa", {})))
if args.dump:
    pr.dump_stats(args.dump)
s = io.StringIO()
stats = pstats.Stats(pr, stream=s)
stats.sort_stats("tottime").print_stats(args.top)
if args.first and args.side == "musa":
    stats.sort_stats("cumulative").print_stats("torch_musa", args.top)
print(s.getvalue())
