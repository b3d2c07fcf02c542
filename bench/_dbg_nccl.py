import faulthandler; faulthandler.enable()
import os, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29655")
dist.init_process_group("mccl", rank=0, world_size=1)
t = torch.arange(4.0, device="musa")
print("before", flush=True)
w = dist.all_reduce(t, async_op=True)
print("launched", flush=True)
w.wait(); print("waited", t.cpu(), flush=True)
