"""Where a compiled GPT training step spends host time: step time, graph count, cProfile top 18.

    TORCH_MUSA_DRIVER=cuda python bench/compile_profile.py musa
    TORCH_DEVICE_BACKEND_AUTOLOAD=0 python bench/compile_profile.py native

Run the two sides in separate processes (native never loads torch_musa: pytorch/pytorch#161129).
"""
import cProfile, pstats, sys, os, time, io
side = sys.argv[1]
if side == "musa":
    import torch_musa
else:
    sys.modules["torch_musa"] = None
import torch, torch.nn as nn
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_bench import GPT
from torch._dynamo.utils import counters
dev = "cuda" if side == "native" else "musa"
mod = torch.cuda if side == "native" else torch.musa
torch.manual_seed(0)
model = GPT(seq=512).to(dev); opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
cm = torch.compile(model)
data = torch.randint(0, 8192, (16, 513), device=dev)
def step():
    with torch.autocast(dev, dtype=torch.bfloat16):
        logits = cm(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), data[:, 1:].reshape(-1))
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
for _ in range(3): step()
mod.synchronize()
t0 = time.perf_counter()
for _ in range(5): step()
mod.synchronize(); t_all = (time.perf_counter() - t0) / 5
# host time without waiting: issue 5 steps, time the issuing
t0 = time.perf_counter()
pr = cProfile.Profile(); pr.enable()
for _ in range(3): step()
pr.disable()
mod.synchronize()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
print(side, "step ms", round(t_all * 1e3, 2), "graphs", dict(counters["stats"]), "breaks", sum(counters["graph_break"].values()))
print("\n".join(s.getvalue().splitlines()[:45]))
