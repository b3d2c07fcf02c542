"""Rank-side code of the distributed tests: `python -m tests.distributed.scenarios NAME`.

Each scenario runs in every rank (RANK, WORLD_SIZE, MASTER_ADDR/PORT in the environment, as torchrun
sets them), checks musa results against a reference computed on the CPU in the same process (every
rank knows every rank's inputs), and writes {"failures": [...], ...} to $MCCL_RESULT. Scenarios are
world-size agnostic, so the GPU suite runs them at world 1 with the cuda driver.
"""
import faulthandler
import json
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn

import torch_musa._version_gate as version_gate

faulthandler.enable()  # a crash in a rank shows where; a hang too, just before the launcher's deadline
if os.environ.get("MCCL_DUMP_AFTER"):
    faulthandler.dump_traceback_later(float(os.environ["MCCL_DUMP_AFTER"]), exit=True)
RANK = int(os.environ.get("RANK", 0))
WORLD = int(os.environ.get("WORLD_SIZE", 1))
failures = []
extra = {}


def check(name, got, expected, **tol):
    try:
        assert got.device.type == "musa", f"result on {got.device}"
        g = got.cpu()
        if expected.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            g, expected = g.float(), expected.float()
        torch.testing.assert_close(g, expected, **tol)
    except AssertionError as e:
        failures.append(f"{name}: {str(e)[:300]}")


def expect_error(name, fn, *needles):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        msg = str(e)
        missing = [n for n in needles if n.lower() not in msg.lower()]
        if missing:
            failures.append(f"{name}: error lacks {missing}: {msg[:300]}")
        return
    failures.append(f"{name}: no error raised")


def init(**kw):
    kw.setdefault("timeout", timedelta(seconds=60))
    dist.init_process_group(kw.pop("backend", "mccl"), rank=RANK, world_size=WORLD, **kw)
    torch.musa.set_device(int(os.environ.get("LOCAL_RANK", 0)))


def dev():
    return torch.device("musa", torch.musa.current_device())


# ---------------------------------------------------------------- collectives
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int32, torch.int64, torch.int8, torch.uint8]
FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def value(rank, dtype, n=6, salt=0):
    """Rank `rank`'s input: small exact values, so every dtype's reductions are exact."""
    base = torch.arange(n, dtype=torch.int64) + 1 + 2 * rank + salt
    if dtype == torch.bool:
        return (base % 2 == 0)
    if dtype in (torch.int8, torch.uint8):
        return (base % 3 + 1).to(dtype)
    if dtype in FLOAT8:
        return (base % 4 * 0.5).to(dtype)
    return base.to(dtype)


def reduce_ref(dtype, op, n=6, salt=0):
    vals = torch.stack([value(r, dtype, n, salt).to(torch.float64) for r in range(WORLD)])
    if op == dist.ReduceOp.SUM:
        out = vals.sum(0)
    elif op == dist.ReduceOp.PRODUCT:
        out = vals.prod(0)
    elif op == dist.ReduceOp.MIN:
        out = vals.min(0).values
    elif op == dist.ReduceOp.MAX:
        out = vals.max(0).values
    elif op == dist.ReduceOp.AVG:
        out = vals.mean(0)
    if dtype == torch.bool:
        return out.bool() if op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX) else out.bool() if WORLD == 1 else \
            torch.stack([value(r, dtype, n, salt) for r in range(WORLD)]).all(0)
    return out.to(dtype)


def scenario_collectives():
    init(device_id=torch.device("musa", int(os.environ.get("LOCAL_RANK", 0))))
    d = dev()
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    for dtype in FLOATS + INTS + [torch.bool]:
        for op in ops + ([dist.ReduceOp.AVG] if dtype in FLOATS else []):
            t = value(RANK, dtype).to(d)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {dtype} {op}", t, reduce_ref(dtype, op))
        if dtype == torch.bool:
            continue
        t = value(RANK, dtype).to(d)
        dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
        if RANK == 0:
            check(f"reduce {dtype}", t, reduce_ref(dtype, dist.ReduceOp.SUM))
        out = torch.empty(6, dtype=dtype, device=d)
        dist.reduce_scatter_tensor(out, torch.cat([value(RANK, dtype, salt=j) for j in range(WORLD)]).to(d))
        check(f"reduce_scatter_tensor {dtype}", out, reduce_ref(dtype, dist.ReduceOp.SUM, salt=RANK))
        outs = torch.empty(6, dtype=dtype, device=d)
        dist.reduce_scatter(outs, [value(RANK, dtype, salt=j).to(d) for j in range(WORLD)])
        check(f"reduce_scatter {dtype}", outs, reduce_ref(dtype, dist.ReduceOp.SUM, salt=RANK))
    for dtype in (torch.float32, torch.bfloat16):
        out = torch.empty(6, dtype=dtype, device=d)
        dist.reduce_scatter_tensor(out, torch.cat([value(RANK, dtype, salt=j) for j in range(WORLD)]).to(d),
                                   op=dist.ReduceOp.AVG)
        check(f"reduce_scatter_tensor AVG {dtype}", out, reduce_ref(dtype, dist.ReduceOp.AVG, salt=RANK))
    t = value(RANK, torch.float32).to(d)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    check("all_reduce PREMUL_SUM", t, reduce_ref(torch.float32, dist.ReduceOp.SUM) * 0.5)

    # data movement: every dtype, float8 included
    root = WORLD - 1
    for dtype in FLOATS + INTS + [torch.bool] + FLOAT8:
        t = value(RANK, dtype).to(d)
        dist.broadcast(t, src=root)
        check(f"broadcast {dtype}", t, value(root, dtype))
        every = [value(r, dtype) for r in range(WORLD)]
        outs = [torch.empty(6, dtype=dtype, device=d) for _ in range(WORLD)]
        dist.all_gather(outs, value(RANK, dtype).to(d))
        for r in range(WORLD):
            check(f"all_gather {dtype} [{r}]", outs[r], every[r])
        flat = torch.empty(6 * WORLD, dtype=dtype, device=d)
        dist.all_gather_into_tensor(flat, value(RANK, dtype).to(d))
        check(f"all_gather_into_tensor {dtype}", flat, torch.cat(every))
        # all_to_all_single, uneven: rank r sends (j + 1) elements to rank j
        send = torch.cat([value(RANK, dtype, n=j + 1, salt=10 * j) for j in range(WORLD)]).to(d)
        recv = torch.empty((RANK + 1) * WORLD, dtype=dtype, device=d)
        dist.all_to_all_single(recv, send, output_split_sizes=[RANK + 1] * WORLD,
                               input_split_sizes=[j + 1 for j in range(WORLD)])
        check(f"all_to_all_single uneven {dtype}", recv,
              torch.cat([value(r, dtype, n=RANK + 1, salt=10 * RANK) for r in range(WORLD)]))
        gl = [torch.empty(6, dtype=dtype, device=d) for _ in range(WORLD)] if RANK == 0 else None
        dist.gather(value(RANK, dtype).to(d), gl, dst=0)
        if RANK == 0:
            for r in range(WORLD):
                check(f"gather {dtype} [{r}]", gl[r], every[r])
        sc = torch.empty(6, dtype=dtype, device=d)
        dist.scatter(sc, [value(r, dtype, salt=3).to(d) for r in range(WORLD)] if RANK == 0 else None, src=0)
        check(f"scatter {dtype}", sc, value(RANK, dtype, salt=3))
    float8_reductions(d)
    reduce_leaves_non_roots_untouched(d)

    outs = [torch.empty(3, device=d) for _ in range(WORLD)]
    dist.all_to_all(outs, [torch.full((3,), float(10 * RANK + j), device=d) for j in range(WORLD)])
    for r in range(WORLD):
        check(f"all_to_all [{r}]", outs[r], torch.full((3,), float(10 * r + RANK)))

    # point to point: a ring
    if WORLD > 1:
        nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
        got = torch.empty(4, device=d)
        if RANK % 2 == 0:
            dist.send(torch.full((4,), float(RANK), device=d), nxt)
            dist.recv(got, prv)
        else:
            dist.recv(got, prv)
            dist.send(torch.full((4,), float(RANK), device=d), nxt)
        check("send/recv", got, torch.full((4,), float(prv)))
        got = torch.empty(4, device=d)
        reqs = [dist.isend(torch.full((4,), float(RANK + 100), device=d), nxt), dist.irecv(got, prv)]
        for r in reqs:
            r.wait()
        check("isend/irecv", got, torch.full((4,), float(prv + 100)))
        got = torch.empty(4, device=d)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((4,), float(RANK + 7), device=d), nxt),
                                       dist.P2POp(dist.irecv, got, prv)])
        for r in reqs:
            r.wait()
        check("batch_isend_irecv", got, torch.full((4,), float(prv + 7)))
    # torch accepts Gloo groups only; on mccl it runs on mccl's CPU side channel (torch_musa/gates/c10d.py)
    dist.monitored_barrier(timeout=timedelta(seconds=30), wait_all_ranks=True)
    dist.monitored_barrier()
    dist.barrier()

    # coalesced forms
    ts = [value(RANK, torch.float32, n=n).to(d) for n in (3, 5)]
    dist.all_reduce_coalesced(ts)
    for i, n in enumerate((3, 5)):
        check(f"all_reduce_coalesced [{i}]", ts[i], reduce_ref(torch.float32, dist.ReduceOp.SUM, n=n))
    flats = [torch.empty(n * WORLD, device=d) for n in (2, 4)]
    with dist._coalescing_manager(device=d, async_ops=True) as cm:
        for n, f in zip((2, 4), flats):
            dist.all_gather_into_tensor(f, value(RANK, torch.float32, n=n).to(d))
    cm.wait()
    for n, f in zip((2, 4), flats):
        check(f"coalesced all_gather_into_tensor {n}", f, torch.cat([value(r, torch.float32, n=n) for r in range(WORLD)]))
    outs = [torch.empty(n, device=d) for n in (2, 4)]
    with dist._coalescing_manager(device=d, async_ops=True) as cm:
        for n, o in zip((2, 4), outs):
            dist.reduce_scatter_tensor(o, torch.cat([value(RANK, torch.float32, n=n, salt=j) for j in range(WORLD)]).to(d))
    cm.wait()
    for n, o in zip((2, 4), outs):
        check(f"coalesced reduce_scatter_tensor {n}", o, reduce_ref(torch.float32, dist.ReduceOp.SUM, n=n, salt=RANK))

    # async: wait, is_completed, get_future (the AVG's division must happen on every path)
    t = value(RANK, torch.float32).to(d)
    w = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    w.wait()
    if not w.is_completed():
        failures.append("is_completed() False after wait()")
    check("async all_reduce AVG wait", t, reduce_ref(torch.float32, dist.ReduceOp.AVG))
    t = value(RANK, torch.float32).to(d)
    fut = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True).get_future()
    res = fut.wait()
    check("async all_reduce AVG future value", res[0], reduce_ref(torch.float32, dist.ReduceOp.AVG))
    check("async all_reduce AVG future tensor", t, reduce_ref(torch.float32, dist.ReduceOp.AVG))
    chained = dist.all_reduce(value(RANK, torch.float32).to(d), async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    check("future.then", chained.wait(), reduce_ref(torch.float32, dist.ReduceOp.SUM) * 2)
    t = value(RANK, torch.float32).to(d)
    w = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    deadline = time.monotonic() + 30
    while not w.is_completed() and time.monotonic() < deadline:
        time.sleep(0.001)
    check("async all_reduce AVG is_completed polling", t, reduce_ref(torch.float32, dist.ReduceOp.AVG))

    # non-contiguous: staged through a contiguous copy, counted, written back
    torch.musa.distributed.reset_staged_counts()
    base = torch.stack([value(RANK, torch.float32, salt=s) for s in range(2)]).t().contiguous()  # 6 x 2
    nc = base.to(d).t()  # 2 x 6 view, not contiguous
    dist.all_reduce(nc)
    ref = torch.stack([reduce_ref(torch.float32, dist.ReduceOp.SUM, salt=s) for s in range(2)])
    check("all_reduce non-contiguous", nc, ref)
    if torch.musa.distributed.staged_counts().get("all_reduce") != 1:
        failures.append(f"staged count: {torch.musa.distributed.staged_counts()}")

    # groups: new_group, split_group
    evens = list(range(0, WORLD, 2))
    g = dist.new_group(evens)
    if RANK in evens:
        t = value(RANK, torch.float32).to(d)
        dist.all_reduce(t, group=g)
        check("new_group all_reduce", t, sum(value(r, torch.float32) for r in evens))
    halves = [list(range(0, (WORLD + 1) // 2)), list(range((WORLD + 1) // 2, WORLD))]
    halves = [h for h in halves if h]
    if version_gate.split_group_on_musa():
        sg = dist.split_group(split_ranks=halves)
        mine = next(h for h in halves if RANK in h)
        t = value(RANK, torch.float32).to(d)
        dist.all_reduce(t, group=sg)
        check("split_group all_reduce", t, sum(value(r, torch.float32) for r in mine))
    else:
        extra.setdefault("not_run", []).append("split_group: " + version_gate.split_group_on_musa.__doc__)
    objs = [None] * WORLD
    dist.all_gather_object(objs, {"rank": RANK})
    if objs != [{"rank": r} for r in range(WORLD)]:
        failures.append(f"all_gather_object: {objs}")
    extra["backend"] = dist.get_backend()
    extra["checks_collectives"] = dist.group.WORLD._get_backend(d).checks_collectives
    dist.destroy_process_group()


def float8_reductions(d):
    """SUM/AVG/MIN/MAX of float8 tensors against the float64 reduction cast to float8: bit-exact, as
    the inputs are multiples of 0.5 whose sums and means float8 holds (or rounds once)."""
    exact = dict(rtol=0, atol=0)
    for dtype in FLOAT8:
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MIN, dist.ReduceOp.MAX):
            t = value(RANK, dtype).to(d)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {dtype} {op}", t, reduce_ref(dtype, op), **exact)
            t = value(RANK, dtype).to(d)
            dist.reduce(t, dst=0, op=op)
            check(f"reduce {dtype} {op}", t, reduce_ref(dtype, op) if RANK == 0 else value(RANK, dtype), **exact)
            out = torch.empty(6, dtype=dtype, device=d)
            dist.reduce_scatter_tensor(out, torch.cat([value(RANK, dtype, salt=j) for j in range(WORLD)]).to(d), op=op)
            check(f"reduce_scatter_tensor {dtype} {op}", out, reduce_ref(dtype, op, salt=RANK), **exact)
            out = torch.empty(6, dtype=dtype, device=d)
            dist.reduce_scatter(out, [value(RANK, dtype, salt=j).to(d) for j in range(WORLD)], op=op)
            check(f"reduce_scatter {dtype} {op}", out, reduce_ref(dtype, op, salt=RANK), **exact)
        t = value(RANK, dtype).to(d)
        dist.all_reduce(t, op=dist.ReduceOp.SUM, async_op=True).wait()
        check(f"async all_reduce {dtype}", t, reduce_ref(dtype, dist.ReduceOp.SUM), **exact)
        if torch.musa.get_driver_name() == "host":  # on NCCL a coalesced block needs NCCL's own FP8 reductions
            outs = [torch.empty(n, dtype=dtype, device=d) for n in (2, 4)]
            with dist._coalescing_manager(device=d, async_ops=True) as cm:
                for n, o in zip((2, 4), outs):
                    dist.reduce_scatter_tensor(o, torch.cat([value(RANK, dtype, n=n, salt=j) for j in range(WORLD)]).to(d))
            cm.wait()
            for n, o in zip((2, 4), outs):
                check(f"coalesced reduce_scatter_tensor {dtype} {n}", o,
                      reduce_ref(dtype, dist.ReduceOp.SUM, n=n, salt=RANK), **exact)


def reduce_leaves_non_roots_untouched(d):
    """dist.reduce writes the root's tensor only: every other rank's input stays as it was, for every op."""
    root = WORLD - 1
    for dtype in (torch.float32, torch.int32):
        ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
        ops += [dist.ReduceOp.AVG, dist._make_nccl_premul_sum(0.5)] if dtype.is_floating_point else []
        for op in ops:
            t = value(RANK, dtype).to(d)
            dist.reduce(t, dst=root, op=op)
            if RANK != root:
                check(f"reduce non-root input {dtype} {op}", t, value(RANK, dtype), rtol=0, atol=0)
            elif op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MIN, dist.ReduceOp.MAX):
                check(f"reduce root {dtype} {op}", t, reduce_ref(dtype, op))


# ---------------------------------------------------------------- DDP
class Net(nn.Module):
    def __init__(self, unused_branch=False):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 32), nn.Linear(32, 4)
        self.unused = nn.Linear(32, 4) if unused_branch else None

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def batches(steps, per_rank=4, in_dim=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(per_rank * WORLD, in_dim, generator=g), torch.randn(per_rank * WORLD, 4, generator=g))
            for _ in range(steps)]


def reference_losses(make, data, lr=0.1, accumulate=1):
    torch.manual_seed(0)
    model = make()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for i, (x, y) in enumerate(data):
        loss = nn.functional.mse_loss(model(x), y) / accumulate
        loss.backward()
        losses.append(loss.item() * accumulate)
        if (i + 1) % accumulate == 0:
            opt.step()
            opt.zero_grad()
    return losses, model


def local(t, per_rank=4):
    return t[RANK * per_rank:(RANK + 1) * per_rank].to(dev())


def train_like_reference(name, model, data, ref_losses, bound, inputs=local, across_ranks=True):
    """SGD(lr=0.1) steps of `model` on `data` (this rank's share: `inputs`); records every step whose loss
    (averaged over the ranks) is further than bound(reference) from the single-process loss."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(data):
        loss = nn.functional.mse_loss(model(inputs(x)).float(), inputs(y))
        loss.backward()
        opt.step()
        opt.zero_grad()
        got = mean_over_ranks(loss.item()) if across_ranks else loss.item()
        if abs(got - ref_losses[i]) > bound(ref_losses[i]):
            failures.append(f"{name} step {i}: loss {got} vs single-process {ref_losses[i]}")


def mean_over_ranks(v):
    t = torch.tensor([v], device=dev())
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    return t.item()


def scenario_ddp():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    init()
    data = batches(4)
    variants = {
        "default": dict(),
        "gradient_as_bucket_view": dict(gradient_as_bucket_view=True),
        "small_buckets": dict(bucket_cap_mb=0.0005),
        "static_graph": dict(static_graph=True),
        "find_unused_parameters": dict(find_unused_parameters=True, unused_branch=True),
        "allreduce_hook": dict(hook=(None, default_hooks.allreduce_hook)),
        "fp16_compress_hook": dict(hook=(None, default_hooks.fp16_compress_hook), tol=dict(rtol=2e-3, atol=2e-3)),
        # (torch admits it by name only where it has CUDA and NCCL; a musa DDP on mccl takes it on both drivers)
        "bf16_compress_hook": dict(hook=(None, default_hooks.bf16_compress_hook), tol=dict(rtol=2e-2, atol=2e-2)),
    }
    ref_losses, ref_model = reference_losses(Net, data)
    for name, kw in variants.items():
        kw = dict(kw)
        hook, tol = kw.pop("hook", None), kw.pop("tol", dict(rtol=1e-5, atol=1e-6))
        unused = kw.pop("unused_branch", False)
        torch.manual_seed(0)
        net = Net(unused_branch=unused)
        if unused:  # same initial fc1/fc2 as the reference
            torch.manual_seed(0)
            ref_like = Net()
            net.fc1.load_state_dict(ref_like.fc1.state_dict())
            net.fc2.load_state_dict(ref_like.fc2.state_dict())
        model = DDP(net.to(dev()), **kw)
        if hook:
            model.register_comm_hook(hook[0], hook[1])
        model._set_ddp_runtime_logging_sample_rate(1)
        train_like_reference(f"ddp {name}", model, data, ref_losses, lambda r: tol["atol"] + tol["rtol"] * abs(r))
        check(f"ddp {name} final fc1.weight", model.module.fc1.weight.detach(), ref_model.fc1.weight.detach(), **tol)
        if name == "default":
            stats = model._get_ddp_logging_data()
            extra["ddp_timing"] = {k: stats.get(k) for k in ("avg_forward_compute_time", "avg_backward_compute_time",
                                                               "avg_backward_comm_time")}
            if not stats.get("avg_backward_compute_time", 0) > 0:
                failures.append(f"ddp timer recorded no backward compute time: {extra['ddp_timing']}")
    # PowerSGD: approximate by design; vanilla all_reduce until start_powerSGD_iter, then every rank
    # must keep identical parameters. (On the cuda driver its torch.cuda.synchronize(bucket device)
    # reaches musa through torch_musa/gates/ddp_hooks.py.)
    powersgd(data, ref_losses)
    # no_sync: two micro-batches accumulate locally, the second synchronizes
    ref_acc, ref_acc_model = reference_losses(Net, data, accumulate=2)
    torch.manual_seed(0)
    model = DDP(Net().to(dev()))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(data):
        if i % 2 == 0:
            with model.no_sync():
                (nn.functional.mse_loss(model(local(x)), local(y)) / 2).backward()
        else:
            (nn.functional.mse_loss(model(local(x)), local(y)) / 2).backward()
            opt.step()
            opt.zero_grad()
    check("ddp no_sync final fc1.weight", model.module.fc1.weight.detach(), ref_acc_model.fc1.weight.detach(),
          rtol=1e-5, atol=1e-6)
    dist.destroy_process_group()


def powersgd(data, ref_losses):
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = DDP(Net().to(dev()))
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2)
    model.register_comm_hook(state, psgd.powerSGD_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i, (x, y) in enumerate(data):
        loss = nn.functional.mse_loss(model(local(x)), local(y))
        loss.backward()
        opt.step()
        opt.zero_grad()
        if i < 1 and abs(mean_over_ranks(loss.item()) - ref_losses[i]) > 1e-5:
            failures.append(f"powerSGD step {i} before compression differs from single-process")
    w = model.module.fc1.weight.detach().clone()
    ws = [torch.empty_like(w) for _ in range(WORLD)]
    dist.all_gather(ws, w)
    if not all(torch.equal(ws[0].cpu(), x.cpu()) for x in ws):
        failures.append("powerSGD: ranks' parameters differ")


# ---------------------------------------------------------------- FSDP2, FSDP1, DTensor / TP, DCP
def scenario_syncbn():
    """nn.SyncBatchNorm under DDP: batch statistics over every rank's share, so training matches
    BatchNorm on the concatenated batch in one process (running statistics included)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    init()
    data = batches(4)

    def make():
        return nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4))

    ref_losses, ref_model = reference_losses(make, data)
    torch.manual_seed(0)
    model = nn.SyncBatchNorm.convert_sync_batchnorm(make()).to(dev())
    if not isinstance(model[1], nn.SyncBatchNorm):
        failures.append(f"convert_sync_batchnorm gave {type(model[1]).__name__}")
    train_like_reference("syncbn", DDP(model), data, ref_losses, lambda r: 1e-4 * max(1.0, abs(r)))
    check("syncbn running_mean", model[1].running_mean, ref_model[1].running_mean, rtol=1e-4, atol=1e-5)
    check("syncbn running_var", model[1].running_var, ref_model[1].running_var, rtol=1e-4, atol=1e-5)


def scenario_fsdp_tp():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    init(device_id=torch.device("musa", int(os.environ.get("LOCAL_RANK", 0))))
    mesh = init_device_mesh("musa", (WORLD,))
    data = batches(3)
    ref_losses, ref_model = reference_losses(Net, data)
    variants = {
        "fsdp2": dict(),
        "fsdp2 reshard_after_forward=False": dict(reshard_after_forward=False),
        "fsdp2 mixed precision bf16": dict(mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                                         reduce_dtype=torch.float32)),
        "fsdp2 cpu offload": dict(offload_policy=CPUOffloadPolicy(pin_memory=True)),
    }
    for name, kw in variants.items():
        torch.manual_seed(0)
        model = Net().to(dev())
        for m in (model.fc1, model.fc2):
            fully_shard(m, mesh=mesh, **kw)
        fully_shard(model, mesh=mesh, **kw)
        tol = 3e-2 if "bf16" in name else 1e-5
        train_like_reference(name, model, data, ref_losses, lambda r: tol * max(1.0, abs(r)))
        full = model.fc1.weight.detach().to(dev()).full_tensor()  # (offloaded parameters live on the cpu)
        check(f"{name} final fc1.weight", full, ref_model.fc1.weight.detach(), rtol=tol, atol=tol)

    # FSDP1 basics
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    torch.manual_seed(0)
    model = FSDP(Net(), device_id=dev(), use_orig_params=True)
    train_like_reference("fsdp1", model, data, ref_losses, lambda r: 1e-5)

    # DTensor
    t = torch.arange(4.0 * WORLD * 2).view(4 * WORLD, 2)
    dt = distribute_tensor(t.to(dev()), mesh, [Shard(0)])
    check("distribute_tensor Shard(0) local", dt.to_local(), t[RANK * 4:(RANK + 1) * 4])
    check("redistribute to Replicate", dt.redistribute(mesh, [Replicate()]).to_local(), t)
    check("DTensor matmul", (dt @ distribute_tensor(torch.ones(2, 3).to(dev()), mesh, [Replicate()])).full_tensor(),
          t @ torch.ones(2, 3))

    # tensor parallel MLP: fc1 column-wise, fc2 row-wise; same batch on every rank
    torch.manual_seed(0)
    model = parallelize_module(Net().to(dev()), mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    full_losses, full_model = reference_losses(Net, [(x[:4], y[:4]) for x, y in data])
    train_like_reference("tensor parallel", model, data, full_losses, lambda r: 1e-5,
                         inputs=lambda t: t[:4].to(dev()), across_ranks=False)
    check("tensor parallel final fc2.weight", model.fc2.weight.full_tensor().detach(),
          full_model.fc2.weight.detach(), rtol=1e-5, atol=1e-6)

    # DCP: save a sharded FSDP2 state dict, load it into a fresh model
    import torch.distributed.checkpoint as dcp

    if not version_gate.dcp_saves_musa_tensors():
        extra.setdefault("not_run", []).append("dcp: " + version_gate.dcp_saves_musa_tensors.__doc__)
        dist.destroy_process_group()
        return
    ckpt = sys.argv[2] if len(sys.argv) > 2 else os.environ["MCCL_CKPT"]
    torch.manual_seed(0)
    model = Net().to(dev())
    fully_shard(model, mesh=mesh)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.5)
    dcp.save(model.state_dict(), checkpoint_id=ckpt)
    torch.manual_seed(1)
    fresh = Net().to(dev())
    fully_shard(fresh, mesh=mesh)
    sd = fresh.state_dict()
    dcp.load(sd, checkpoint_id=ckpt)
    fresh.load_state_dict(sd)
    for (n, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        check(f"dcp round trip {n}", b.full_tensor(), a.full_tensor().cpu())
    dist.destroy_process_group()


# ---------------------------------------------------------------- faults
def threads():
    return len(os.listdir("/proc/self/task"))


def scenario_faults():
    mode = sys.argv[2]
    if mode == "mismatch":
        before_threads, before_mem = threads(), torch.musa.memory_allocated()
        init(timeout=timedelta(seconds=20))
        d = dev()
        expect_error("cpu tensor", lambda: dist.all_reduce(torch.ones(2)), "cpu")
        expect_error("shape mismatch", lambda: dist.all_reduce(torch.ones(4 if RANK == 0 else 8, device=d)),
                     "all_reduce", "8 elements", "4 elements")
        expect_error("dtype mismatch", lambda: dist.all_gather_into_tensor(
            torch.empty(2 * WORLD, device=d, dtype=torch.float32 if RANK == 0 else torch.float64),
            torch.ones(2, device=d, dtype=torch.float32 if RANK == 0 else torch.float64)),
            "all_gather_into_tensor", "Float", "Double")
        expect_error("different collectives", lambda: dist.broadcast(torch.ones(2, device=d), 0) if RANK == 0
                     else dist.all_reduce(torch.ones(2, device=d)), "BROADCAST", "ALLREDUCE")
        expect_error("cpu tensor on one rank", lambda: dist.all_gather_into_tensor(
            torch.empty(2 * WORLD, device=d), torch.ones(2, device=d) if RANK == 0 else torch.ones(2)),
            "all_gather_into_tensor")
        t = torch.full((3,), float(RANK + 1), device=d)
        dist.reduce(t, dst=0, op=dist._make_nccl_premul_sum(2.0))
        check("reduce PREMUL_SUM", t, torch.full((3,), 2.0 * sum(range(1, WORLD + 1))) if RANK == 0
              else torch.full((3,), float(RANK + 1)))  # off the root the input is left as it was
        expect_error("output size", lambda: dist.all_gather_into_tensor(torch.empty(3, device=d), torch.ones(2, device=d)),
                     "all_gather_into_tensor", "world_size")
        # monitored_barrier names the ranks that did not come: here every rank but 0 comes late
        if RANK == 0:
            expect_error("monitored_barrier missing ranks", lambda: dist.monitored_barrier(
                timeout=timedelta(seconds=2), wait_all_ranks=True), "monitoredBarrier",
                ", ".join(str(r) for r in range(1, WORLD)))
        else:
            time.sleep(3)
            expect_error("monitored_barrier late rank", lambda: dist.monitored_barrier(timeout=timedelta(seconds=2)),
                         "rank 0")
        dist.monitored_barrier(timeout=timedelta(seconds=30))  # and passes once all come
        t = torch.ones(3, device=d)  # the group still works after the errors
        dist.all_reduce(t)
        check("all_reduce after errors", t, torch.full((3,), float(WORLD)))
        del t
        dist.destroy_process_group()
        time.sleep(0.5)
        extra["threads"] = [before_threads, threads()]
        extra["memory_allocated"] = [before_mem, torch.musa.memory_allocated()]
    elif mode in ("die", "hang"):
        init(timeout=timedelta(seconds=5))
        t = torch.ones(2, device=dev())
        dist.all_reduce(t)  # connected
        if RANK == WORLD - 1:
            if mode == "die":
                os._exit(17)
            time.sleep(12)  # longer than the group timeout (5 s)
            os._exit(0)
        t0 = time.monotonic()
        try:
            dist.all_reduce(t)
            failures.append(f"{mode}: no error")
        except Exception as e:  # noqa: BLE001
            extra["error"] = str(e)[:300]
        extra["seconds"] = time.monotonic() - t0
        write()
        os._exit(0)  # the group is broken: leave without waiting for the lost rank


def write():
    with open(os.environ["MCCL_RESULT"], "w") as f:
        json.dump({"failures": failures, **extra}, f)


if __name__ == "__main__":
    globals()[f"scenario_{sys.argv[1]}"]()
    write()
