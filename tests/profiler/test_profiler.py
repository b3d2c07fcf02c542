"""torch.profiler on musa: device events measured on the device, linked to the CPU ops that
launched them, one track per musa stream, device-time tables, exports, memory events, and the
legacy per-op timer. The reference is what torch.profiler gives for CUDA: the same event kinds,
columns and trace layout. These run on the host driver in CI and on the GPU (cuda driver), where
the kernels, copies and memsets are CUPTI's (named by kernel, one track per CUDA stream under the
musa streams) and musa adds its graph replays."""
import json
import os
import re
import time

import pytest
import torch
import torch.distributed as dist
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from torch_musa import _version_gate

from tests.distributed.launcher import free_port

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
HOST = torch.musa.get_driver_name() == "host"
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def device_events(prof):
    return sorted((e for e in prof.events() if e.device_type == DeviceType.PrivateUse1),
                  key=lambda e: e.time_range.start)


def trace_of(prof, tmp_path):
    path = os.path.join(tmp_path, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f)["traceEvents"]  # must be valid JSON


def device_work(trace):
    """The device's kernels, copies and memsets in start order, each with the name of the CPU op
    that launched it (its correlation id is the CPU op's External id)."""
    cpu = {e["args"]["External id"]: e for e in trace if e.get("cat") == "cpu_op"}
    work = sorted((e for e in trace if e.get("cat") in DEVICE_CATS), key=lambda e: e["ts"])
    return [(e, cpu.get(e["args"].get("External id"))) for e in work]


def launched_by(trace):
    """CPU op names in the order their device work ran (consecutive repeats merged)."""
    names = []
    for _, op in device_work(trace):
        name = op["name"] if op else None
        if not names or names[-1] != name:
            names.append(name)
    return names


def native_launch_order(x_cpu, tmp_path):
    """launched_by of the test's ops on torch.cuda, profiled with CUPTI."""
    x = x_cpu.cuda()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        x.matmul(x).relu().sum().cpu()
        torch.cuda.synchronize()
    return launched_by(trace_of(prof, tmp_path))[:3]


def test_known_op_sequence_gives_device_events_in_order(device, tmp_path):
    x = torch.randn(192, 192, device=device)
    torch.musa.synchronize()
    t0 = time.perf_counter()
    with profile(activities=ACTIVITIES) as prof:
        y = x @ x
        z = y.relu()
        s = z.sum()
        host = s.cpu()
        torch.musa.synchronize()
    wall_us = (time.perf_counter() - t0) * 1e6
    assert host.item() == pytest.approx((x.cpu() @ x.cpu()).relu().sum().item(), rel=1e-4)
    trace = trace_of(prof, tmp_path)
    # The host driver launches each aten op as one device event. On the cuda driver the kernels
    # are CUDA's own, linked to the ops that launched them natively (relu runs as clamp_min), so
    # the reference is the same ops profiled on torch.cuda.
    expected = ["aten::mm", "aten::relu", "aten::sum"] if HOST else native_launch_order(x.cpu(), tmp_path)
    assert launched_by(trace)[:3] == expected
    work = device_work(trace)
    assert work[-1][0]["cat"] == "gpu_memcpy"  # the result's copy to the host
    for e, op in work:
        assert e["pid"] == 0 and 0 < e["dur"] <= wall_us and op is not None
    # On one stream, device work runs in launch order and does not overlap.
    for (a, _), (b, _) in zip(work, work[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1
    if HOST:  # the host driver names each event by its aten op, on musa stream 0
        assert [e["name"] for e, _ in work] == ["aten::mm", "aten::relu", "aten::sum", "Memcpy DtoH"]
        assert {e["tid"] for e, _ in work} == {0}


def test_device_events_link_to_the_cpu_ops_that_launched_them(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    with profile(activities=ACTIVITIES) as prof:
        (x @ x).tanh_()
        torch.musa.synchronize()
    work = device_work(trace_of(prof, tmp_path))
    assert {op["name"] for _, op in work} == {"aten::mm", "aten::tanh_"}
    for e, op in work:
        # The device ran it after the CPU launched it.
        assert e["ts"] >= op["ts"] - 1
    # The CPU op carries its device time, as CUDA's do.
    mm = next(e for e in prof.events() if e.name == "aten::mm" and e.device_type == DeviceType.CPU)
    assert mm.self_device_time_total > 0
    assert all(e.device_index == 0 for e in device_events(prof))
    if HOST:  # the CPU ops of the same program on the CPU: the kernel device's CPU op inside a
        # launch is not recorded, so each musa op is one op, as a CUDA op is on CUDA
        x_cpu = x.cpu()
        with profile(activities=[ProfilerActivity.CPU]) as native:
            (x_cpu @ x_cpu).tanh_()
        aten = [[e.name for e in p.events() if e.device_type == DeviceType.CPU and e.name.startswith("aten::")]
                for p in (prof, native)]
        # (the CPU's mm also records its kernel's sub-ops, resolve_conj..., which a device kernel has not)
        assert aten[0] == ["aten::matmul", "aten::mm", "aten::tanh_"]
        assert [n for n in aten[1] if n in aten[0]] == aten[0]
    # ... and RecordFunction is on again once the launches are over.
    with profile(activities=[ProfilerActivity.CPU]) as cpu_prof:
        x @ x
    assert [e.name for e in cpu_prof.events()].count("aten::mm") >= 1


def test_two_streams_are_two_tracks(device, tmp_path):
    x = torch.randn(128, 128, device=device)
    side = torch.musa.Stream()
    side.wait_stream(torch.musa.current_stream())
    with profile(activities=ACTIVITIES) as prof:
        a = x @ x
        with torch.musa.stream(side):
            b = x * 3
        torch.musa.synchronize()
    trace = trace_of(prof, tmp_path)
    tid = {op["name"]: e["tid"] for e, op in device_work(trace)}
    assert tid["aten::mm"] != tid["aten::mul"]
    tracks = {e["tid"]: e["args"]["name"] for e in trace
              if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == 0}
    assert tid["aten::mm"] in tracks and tid["aten::mul"] in tracks
    if HOST:  # tracks are the musa streams themselves
        assert tid["aten::mm"] == torch.musa.current_stream().stream_id == 0
        assert tid["aten::mul"] == side.stream_id
        assert tracks[side.stream_id] == f"musa stream {side.stream_id}"
    assert torch.equal(b.cpu(), x.cpu() * 3) and a.shape == (128, 128)


def test_chrome_trace_has_the_musa_process_and_linked_kernels(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    with profile(activities=ACTIVITIES) as prof:
        x.cpu()
        (x + 1).sum()
        torch.musa.synchronize()
    trace = trace_of(prof, tmp_path)
    names = {e["args"]["name"] for e in trace if e.get("name") == "process_name"}
    assert "musa 0" in names
    cats = {e["cat"] for e in trace if e.get("pid") == 0 and e.get("ph") == "X"}
    assert {"kernel", "gpu_memcpy"} <= cats
    for e, op in device_work(trace):
        assert op is not None and e["dur"] > 0


def test_fills_are_device_work_of_their_op(device, tmp_path):
    t = torch.empty(1000, device=device)
    with profile(activities=ACTIVITIES) as prof:
        t.zero_()
        torch.musa.synchronize()
    fills = [e for e, op in device_work(trace_of(prof, tmp_path)) if op and op["name"] in ("aten::zero_", "aten::fill_")]
    assert fills
    if HOST:  # a fill is what a GPU runs as a memset
        assert {e["cat"] for e in fills} == {"gpu_memset"}
    assert torch.count_nonzero(t.cpu()) == 0


def test_record_function_ranges_on_both_sides(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    with profile(activities=ACTIVITIES) as prof:
        with record_function("myrange"):
            y = (x @ x).relu()
        z = y + 1
        torch.musa.synchronize()
    trace = trace_of(prof, tmp_path)
    cpu = [e for e in trace if e.get("name") == "myrange" and e.get("cat") == "user_annotation"]
    dev = [e for e in trace if e.get("name") == "myrange" and e.get("cat") == "gpu_user_annotation"]
    assert len(cpu) == 1 and len(dev) == 1 and dev[0]["pid"] == 0
    work = device_work(trace)
    inside = [e for e, op in work if op["name"] in ("aten::mm", "aten::relu")]
    add = [e for e, op in work if op["name"] == "aten::add"]
    start, end = dev[0]["ts"], dev[0]["ts"] + dev[0]["dur"]
    assert inside and add
    for e in inside:
        assert start - 0.01 <= e["ts"] and e["ts"] + e["dur"] <= end + 0.01
    assert all(e["ts"] >= end - 0.01 for e in add)  # outside the range
    assert z.shape == (64, 64)


def test_memory_events_sum_to_the_allocator(device):
    torch.musa.synchronize()
    before = torch.musa.memory_stats()
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        a = torch.randn(1000, device=device)
        b = a * 2
        del a
        c = b.sum()
        torch.musa.synchronize()
    after = torch.musa.memory_stats()
    mem = [e for e in prof.profiler.kineto_results.events()
           if e.name() == "[memory]" and e.device_type() == DeviceType.PrivateUse1]
    assert sum(e.nbytes() for e in mem) == after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"]
    allocs = after["allocation.all.allocated"] - before["allocation.all.allocated"]
    frees = after["allocation.all.freed"] - before["allocation.all.freed"]
    assert sum(e.nbytes() > 0 for e in mem) == allocs and sum(e.nbytes() < 0 for e in mem) == frees
    # The table's device-memory column sees them.
    row = next(r for r in prof.key_averages() if r.key == "aten::mul")
    assert row.device_memory_usage == 4096  # one float32 block of 1000 (rounded to 512 B)
    assert c.item() == pytest.approx(b.sum().item())


def test_memory_timeline_exports_for_musa(device, tmp_path):
    x = torch.randn(256, device=device, requires_grad=True)
    with profile(activities=ACTIVITIES, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        (x * x).sum().backward()
        torch.musa.synchronize()
    path = os.path.join(tmp_path, "mem.json")
    prof.export_memory_timeline(path, device="musa:0")
    with open(path) as f:
        times, sizes = json.load(f)
    assert len(times) == len(sizes) > 0 and max(max(s) for s in sizes) > 0


def test_schedule_windows_and_trace_handler(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    ready = []
    handler = torch.profiler.tensorboard_trace_handler(str(tmp_path))

    def on_ready(p):
        ready.append(sorted({e.name for e in p.events() if e.name.startswith("step")}))
        handler(p)

    with profile(activities=ACTIVITIES, schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=on_ready) as prof:
        for i in range(6):
            with record_function(f"step{i}"):
                (x @ x).relu()
            prof.step()
        torch.musa.synchronize()
    assert ready == [["step2", "step3"]]
    files = [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json")]
    assert len(files) == 1
    with open(os.path.join(tmp_path, files[0])) as f:
        trace = json.load(f)["traceEvents"]
    mm_launches = {op["args"]["External id"] for _, op in device_work(trace) if op and op["name"] == "aten::mm"}
    assert len(mm_launches) == 2  # one per active step


def test_table_sorts_by_device_time(device):
    big = torch.randn(384, 384, device=device)
    small = torch.randn(8, device=device)
    with profile(activities=ACTIVITIES) as prof:
        big @ big
        small + 1
        torch.musa.synchronize()
    rows = [r for r in prof.key_averages() if r.device_type == DeviceType.CPU]
    table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=20)
    assert "Self MUSA" in table
    order = [line.split()[0] for line in table.splitlines()[3:] if line.strip() and not line.startswith("-")]
    assert order.index("aten::mm") < order.index("aten::add")
    mm = next(r for r in rows if r.key == "aten::mm")
    add = next(r for r in rows if r.key == "aten::add")
    assert mm.self_device_time_total > add.self_device_time_total > 0


def test_export_stacks_has_device_time(device, tmp_path):
    x = torch.randn(128, 128, device=device)
    # torch records per-op stacks for export_stacks only with the verbose experimental config.
    verbose = torch._C._profiler._ExperimentalConfig(verbose=True)
    with profile(activities=ACTIVITIES, with_stack=True, experimental_config=verbose) as prof:
        (x @ x).relu()
        torch.musa.synchronize()
    path = os.path.join(tmp_path, "stacks.txt")
    prof.export_stacks(path, "self_privateuse1_time_total")  # torch's name for the musa column
    with open(path) as f:
        lines = [line.rsplit(" ", 1) for line in f.read().splitlines()]
    assert lines and any("test_profiler.py" in stack and int(us) > 0 for stack, us in lines)


@pytest.mark.parametrize("use_kineto", [True, False])
def test_autograd_profiler_use_device_musa(device, use_kineto):
    x = torch.randn(256, 256, device=device)
    with torch.autograd.profiler.profile(use_device="musa", use_kineto=use_kineto) as prof:
        x @ x
        torch.musa.synchronize()
    mm = next(e for e in prof.function_events if e.name == "aten::mm" and e.device_type == DeviceType.CPU)
    # use_kineto=False is the legacy per-op timer (profiler stubs): the op's own device time.
    assert mm.device_time_total > 0


def test_cpu_only_profiles_record_no_device_events(device):
    x = torch.randn(64, 64, device=device)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x @ x
        torch.musa.synchronize()
    assert not device_events(prof)
    assert any(e.name == "aten::mm" for e in prof.events())


def test_graph_replay_is_a_device_event(device):
    x = torch.randn(64, 64, device=device)
    g = torch.musa.MUSAGraph()
    s = torch.musa.Stream()
    s.wait_stream(torch.musa.current_stream())
    with torch.musa.stream(s):
        (x @ x).relu()  # warm-up outside the capture
        with torch.musa.graph(g):
            y = (x @ x).relu()
    torch.musa.current_stream().wait_stream(s)
    with profile(activities=ACTIVITIES) as prof:
        g.replay()
        torch.musa.synchronize()
    names = [e.name for e in device_events(prof)]
    assert names.count("MUSAGraph replay") == 1
    torch.testing.assert_close(y.cpu(), (x.cpu() @ x.cpu()).relu(), rtol=1e-4, atol=1e-4)


def test_collective_is_a_device_event(device, tmp_path):
    dist.init_process_group("mccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        t = torch.arange(16.0, device=device)
        out = torch.empty(16, device=device)
        with profile(activities=ACTIVITIES) as prof:
            dist.all_reduce(t)
            dist.all_gather_into_tensor(out, t)
            torch.musa.synchronize()
        trace = trace_of(prof, tmp_path)
        # mccl's launch of each collective is a device event on the musa stream, linked to its
        # c10d op, on both drivers: musa times it itself (on the cuda driver too, where CUPTI
        # traces NCCL's own kernels and copies on NCCL's stream, linked to the record_param_comms
        # op inside the c10d op, and skips an in-place collective at world 1 altogether).
        work = [(e, op["name"]) for e, op in device_work(trace) if op and op["name"].startswith("c10d::")]
        mccl = [(e, name) for e, name in work if e["name"].startswith("mccl:")]
        assert [e["name"] for e, _ in mccl] == ["mccl:all_reduce", "mccl:all_gather_into_tensor"], work
        assert [e["cat"] for e, _ in mccl] == ["kernel", "kernel"]
        assert all(e["pid"] == 0 for e, _ in mccl)  # the musa device's process
        if HOST:  # Gloo's work runs on its own threads: mccl's launches are the device work
            assert len(work) == len(mccl)
        # Each is launched by a musaLaunchKernel runtime call, joined to it by a flow arrow.
        launches = {e["args"]["External id"] for e in trace if e.get("name") == "musaLaunchKernel"}
        assert {e["args"]["External id"] for e, _ in mccl} <= launches
        assert torch.equal(t.cpu(), torch.arange(16.0)) and torch.equal(out.cpu(), torch.arange(16.0))
    finally:
        dist.destroy_process_group()


# --- issue 28: OOM events, memory categories, runtime calls, BasicEvaluation, nvtx ---------------

NATIVE_GPU = "cuda" if not HOST and torch.cuda.is_available() else None
OOM_ARGS = {"Device Type", "Device Id", "Bytes", "Total Allocated", "Total Reserved"}


def oom_events(device, tmp_path):
    """The [OutOfMemory] events of a profiled allocation far beyond the device's memory."""
    musa = torch.device(device).type == "musa"
    acts = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1 if musa else ProfilerActivity.CUDA]
    keep = torch.empty(1000, device=device)
    with profile(activities=acts, profile_memory=True) as prof:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1 << 50, dtype=torch.uint8, device=device)
    del keep
    return [e for e in trace_of(prof, tmp_path) if e.get("name") == "[OutOfMemory]"]


def test_out_of_memory_is_a_trace_event(device, tmp_path):
    (oom,) = oom_events(device, tmp_path)
    args = oom["args"]
    assert OOM_ARGS <= set(args)
    assert args["Device Type"] == int(DeviceType.PrivateUse1) and args["Device Id"] == 0
    assert args["Bytes"] == 1 << 50  # the request (a multiple of 512: as CUDA's allocator rounds it)
    assert args["Total Allocated"] >= 4096 and args["Total Reserved"] >= args["Total Allocated"]
    if NATIVE_GPU:  # the same event torch.cuda's caching allocator leaves
        (native,) = oom_events(NATIVE_GPU, tmp_path)
        assert native["cat"] == oom["cat"] and OOM_ARGS <= set(native["args"])
        assert native["args"]["Bytes"] == args["Bytes"]


def memory_categories(device):
    """The memory profiler's category of each role's tensors after a profiled training step
    (foreach Adam on both devices, as on CUDA), by storage pointer."""
    from torch.profiler._memory_profiler import Action, TensorKey

    device_type = torch.device(device).type
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(device)
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    x = torch.randn(8, 16, device=device)
    model(x).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    acts = [ProfilerActivity.CPU] + {"musa": [ProfilerActivity.PrivateUse1], "cuda": [ProfilerActivity.CUDA]}.get(
        device_type, [])
    with profile(activities=acts, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        model(x).sum().backward()
        opt.step()
    mp = prof._memory_profile()
    by_ptr, by_key = {}, {}  # (a pointer's last tensor is the live one)
    for _, action, (key, version), _ in mp.timeline:
        if isinstance(key, TensorKey) and key.device.type == device_type and action != Action.DESTROY:
            by_ptr[key.storage.ptr] = by_key[key] = mp._categories.get(key, version)
    counts = {}
    for cat in by_key.values():
        counts[cat.name if cat else None] = counts.get(cat.name if cat else None, 0) + 1
    roles = {
        "parameter": [p.data_ptr() for p in model.parameters()],
        "gradient": [p.grad.data_ptr() for p in model.parameters()],
        "optimizer_state": [s[k].data_ptr() for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq")],
    }
    return {role: {by_ptr[p].name if p in by_ptr else "not seen" for p in ptrs} for role, ptrs in roles.items()}, counts


def test_memory_profiler_categorizes_musa_tensors(device):
    musa_roles, musa_counts = memory_categories(device)
    # (against the CPU: native CUDA backward fails in a process with torch_musa, pytorch#161129)
    native_roles, native_counts = memory_categories("cpu")
    assert musa_roles == native_roles == {"parameter": {"PARAMETER"}, "gradient": {"GRADIENT"},
                                          "optimizer_state": {"OPTIMIZER_STATE"}}
    # (Adam's step counters are CPU tensors on every device: the optimizer states compare by role.)
    for cat in ("PARAMETER", "GRADIENT", "ACTIVATION", "AUTOGRAD_DETAIL", "INPUT"):
        assert musa_counts.get(cat) == native_counts.get(cat), (cat, musa_counts, native_counts)


def op_categories(device):
    """Each torch op of a small SGD step (torch's memory-profiler e2e step), with the categories the
    memory profiler gives its input tensors over the step, in op order."""
    from torch._C._profiler import _EventType, _TensorMetadata
    from torch.profiler._memory_profiler import TensorKey
    from torch.utils._pytree import tree_flatten

    w = [torch.ones(1, device=device, requires_grad=True) for _ in range(2)]
    opt = torch.optim.SGD(w, lr=0.1, foreach=False)  # (the CPU's default: the same ops on both)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.PrivateUse1] if torch.device(device).type == "musa" else [])
    with profile(activities=acts, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        x = torch.ones(2, 2, device=device)
        y = torch.cat([x * w[0], x * w[1]], dim=1)
        torch.nn.functional.binary_cross_entropy_with_logits(y, torch.ones(2, 4, device=device)).backward()
        opt.step()
        opt.zero_grad()
    mp = prof._memory_profile()
    cats = {}
    for (key, _), cat in sorted(mp._category_snapshot().items(), key=lambda kv: kv[0][1]):
        name = cat.name if cat else "???"
        if cats.setdefault(key, [name])[-1] != name:
            cats[key].append(name)
    rows = []
    for op in mp._op_tree.dfs():
        if op.typed[0] == _EventType.TorchOp:
            keys = [TensorKey.from_tensor(t) for t in tree_flatten(op.typed[1].inputs)[0]
                    if isinstance(t, _TensorMetadata)]
            rows.append((op.name, tuple("/".join(cats.get(k, ["???"])) for k in keys if k)))
    return rows


def test_memory_profiler_categorizes_each_op_as_on_the_cpu(device):
    musa, cpu = op_categories(device), op_categories("cpu")
    # The op layer records the musa op, not the CPU kernel's own sub-ops inside it: musa's ops are
    # the CPU's in the same order, less those, with the same categories.
    it = iter(cpu)
    assert all(row in it for row in musa), (musa, cpu)
    for name in ("aten::mul", "aten::cat", "aten::detach", "aten::add_"):
        assert [r for r in musa if r[0] == name] == [r for r in cpu if r[0] == name]
    assert ("aten::add_", ("PARAMETER", "GRADIENT")) in musa
    assert ("aten::detach", ("GRADIENT",)) in musa


def test_runtime_calls_link_to_their_device_work(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    with profile(activities=ACTIVITIES) as prof:
        y = (x @ x).relu()
        y.zero_()
        y.cpu()
        ev = torch.musa.Event()
        ev.record()
        torch.musa.current_stream().wait_event(ev)
        ev.synchronize()
        torch.musa.synchronize()
    trace = trace_of(prof, tmp_path)
    runtime = [e for e in trace if e.get("cat") == "privateuse1_runtime"]
    # Calls that launch nothing are events too, in call order, as CUDA's cudaEventRecord... are
    # (the profiler's own stop synchronizes the device once more).
    quiet = ["musaEventRecord", "musaStreamWaitEvent", "musaEventSynchronize", "musaDeviceSynchronize"]
    assert [e["name"] for e in runtime if e["name"] in quiet][:4] == quiet
    assert all(e["tid"] == runtime[0]["tid"] for e in runtime)
    calls = [e for e in runtime if e["name"] not in quiet]
    ops = {e["args"]["External id"]: e for e in trace if e.get("cat") == "cpu_op"}
    names = [(e["name"], ops[e["args"]["External id"]]["name"]) for e in calls]
    # One call per launch on a musa stream, in launch order, on the launching thread, in its CPU op
    # (the copy's in aten::copy_, where CUDA's cudaMemcpyAsync is).
    assert names == [("musaLaunchKernel", "aten::mm"), ("musaLaunchKernel", "aten::relu"),
                     ("musaMemsetAsync", "aten::zero_"), ("musaMemcpyAsync", "aten::copy_")]
    for e in calls:
        op = ops[e["args"]["External id"]]
        assert (e["pid"], e["tid"]) == (op["pid"], op["tid"]) == (os.getpid(), op["tid"])
        assert op["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= op["ts"] + op["dur"] + 1
    # Each call launched device work: work of its own CPU op (host driver), or on the cuda driver
    # CUPTI's work of the kernel device's op that ran inside the call.
    work_ops = [op for _, op in device_work(trace) if op]
    for e in calls:
        assert any(op["args"]["External id"] == e["args"]["External id"] or
                   (op["tid"] == e["tid"] and e["ts"] - 1 <= op["ts"] <= e["ts"] + e["dur"] + 1) for op in work_ops)
    if HOST:  # musa's own device events: each joined to its call by an ac2g flow arrow
        starts = {e["id"]: e for e in trace if e.get("cat") == "ac2g" and e["ph"] == "s"}
        ends = {e["id"]: e for e in trace if e.get("cat") == "ac2g" and e["ph"] == "f"}
        assert len(starts) == len(ends) == len(calls) and starts.keys() == ends.keys()
        assert all(ends[i]["pid"] == 0 and starts[i]["pid"] == os.getpid() for i in starts)
    # They are torch's events as CUDA's runtime calls are: rows in the tables.
    assert {"musaLaunchKernel", "musaMemcpyAsync"} <= {r.key for r in prof.key_averages()}


def evaluation(prof):
    from torch.profiler._utils import BasicEvaluation

    return BasicEvaluation(prof.profiler)


@pytest.mark.skipif(not _version_gate.profiler_anti_patterns_available(),
                    reason="torch.profiler._utils.BasicEvaluation is gone (torch >= 2.15)")
def test_basic_evaluation_sees_musa_launches(device):
    from torch.profiler._utils import BasicEvaluation

    x = torch.randn(32, 32, device=device)
    with profile(activities=ACTIVITIES, with_stack=True) as prof:
        for _ in range(8):
            x = (x @ x).tanh()
        torch.musa.synchronize()
    ev = evaluation(prof)
    launches = [e for e in ev.cuda_events if e.name() == "musaLaunchKernel"]
    kernels = [e for e in ev.cuda_events if e.device_type() == DeviceType.PrivateUse1]
    assert len(launches) == 16 and len(kernels) >= 16
    assert ev.musa_events is ev.cuda_events  # (torch_musa's name for them)
    if HOST:  # each launch pairs with its kernel through their CPU op
        kernel_ops = {k.linked_correlation_id() for k in kernels}
        assert all(e.linked_correlation_id() in kernel_ops for e in launches)
    else:  # the kernels are CUPTI's, paired with CUPTI's launch calls inside musa's
        assert any(e.name().startswith("cudaLaunchKernel") for e in ev.cuda_events)
    assert len(ev.queue_depth_list) >= len(ev.cuda_events)
    if HOST:  # the host driver runs each kernel inside its launch: nothing is ever queued
        assert all(q.queue_depth == 0 for q in ev.queue_depth_list)
    assert all(0.0 <= m.fraction_idle_time <= 1.0 for m in ev.metrics.values())
    ev.get_optimizable_events(2, print_enable=False)
    # A profile without musa device events goes to torch's own function, unchanged.
    with profile(activities=[ProfilerActivity.CPU]) as cpu_prof:
        torch.randn(32, 32).matmul(torch.randn(32, 32))
    cpu_ev = evaluation(cpu_prof)
    torch_fn = BasicEvaluation.compute_queue_depth.__wrapped__
    assert [(q.start, q.end, q.queue_depth) for q in torch_fn(cpu_ev)] == \
        [(q.start, q.end, q.queue_depth) for q in cpu_ev.queue_depth_list]
    assert cpu_ev.cuda_events == [] and cpu_ev.musa_events == []


class _MockKineto:
    """The fields of a kineto event BasicEvaluation reads (times in us)."""

    def __init__(self, name, start, dur, corr, device_type):
        self.name, self._t, self._corr, self._dev = name, (start * 1000, dur * 1000), corr, device_type

    def start_ns(self):
        return self._t[0]

    def duration_ns(self):
        return self._t[1]

    def linked_correlation_id(self):
        return self._corr

    def device_type(self):
        return self._dev


def mock_profile(launch_name, kernel_device):
    """Five launches queued ahead of their kernels, and one more later (torch's CUDA mock shape)."""
    from types import SimpleNamespace
    from unittest import mock

    starts = [400, 500, 600, 700, 800, 1500], [900, 1000, 1100, 1200, 1300, 1700]
    events = [_MockKineto(launch_name, t, 100, i, DeviceType.CPU) for i, t in enumerate(starts[0])]
    events += [_MockKineto("kernel", t, 100, i, kernel_device) for i, t in enumerate(starts[1])]
    cpu = [SimpleNamespace(id=i, name=f"cpu {i}", start_time_ns=t * 100_000, duration_time_ns=100_000,
                           end_time_ns=(t + 1) * 100_000, children=[]) for i, t in enumerate(range(12))]
    return mock.Mock(kineto_results=mock.Mock(events=mock.Mock(return_value=events),
                                              experimental_event_tree=mock.Mock(return_value=cpu)))


@pytest.mark.skipif(not _version_gate.profiler_anti_patterns_available(),
                    reason="torch.profiler._utils.BasicEvaluation is gone (torch >= 2.15)")
def test_musa_queue_depth_is_torchs_for_the_same_cuda_profile():
    from torch.profiler._utils import BasicEvaluation

    musa = BasicEvaluation(mock_profile("musaLaunchKernel", DeviceType.PrivateUse1))
    cuda = BasicEvaluation(mock_profile("cudaLaunchKernel", DeviceType.CUDA))  # torch's own function
    depths = [q.queue_depth for q in musa.queue_depth_list]
    assert depths == [q.queue_depth for q in cuda.queue_depth_list] == [1, 2, 3, 4, 5, 4, 3, 2, 1, 0, 1, 0]
    assert [e.name for e in musa.musa_events] == [e.name.replace("cuda", "musa") for e in cuda.cuda_events] == \
        ["musaLaunchKernel"] * 5 + ["kernel"] * 5 + ["musaLaunchKernel", "kernel"]
    for key in cuda.event_keys:  # per CPU op: queue depth and idle time
        theirs, ours = cuda.metrics[key], musa.metrics[next(k for k in musa.event_keys if k.event.id == key.event.id)]
        assert (ours.queue_depth, ours.idle_time_ns) == (theirs.queue_depth, theirs.idle_time_ns)


def test_nvtx_ranges_and_markers_in_the_trace(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    nvtx = torch.musa.nvtx
    with profile(activities=ACTIVITIES) as prof:
        assert nvtx.range_push("outer") == 0
        with nvtx.range("inner {}", 1):
            y = x @ x
        nvtx.mark("marker")
        assert nvtx.range_pop() == 0 and nvtx.range_pop() == -1
        # torch.profiler.itt feeds Intel's tracer, not torch.profiler: nothing in the trace.
        torch.profiler.itt.range_push("itt range")
        torch.profiler.itt.mark("itt mark")
        torch.profiler.itt.range_pop()
        torch.musa.synchronize()
    trace = trace_of(prof, tmp_path)
    cpu = {e["name"]: e for e in trace if e.get("cat") == "user_annotation"}
    dev = {e["name"]: e for e in trace if e.get("cat") == "gpu_user_annotation"}
    assert set(cpu) == {"outer", "inner 1", "marker"}
    # The device span of the range whose work it is (on the cuda driver, Kineto's spans over CUPTI's kernels).
    assert set(dev) == {"inner 1"} if HOST else "inner 1" in dev and set(dev) <= {"outer", "inner 1"}
    outer, inner = cpu["outer"], cpu["inner 1"]
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    assert inner["ts"] + inner["dur"] <= cpu["marker"]["ts"] <= outer["ts"] + outer["dur"]
    mm = [e for e, op in device_work(trace) if op and op["name"] == "aten::mm"]
    assert mm and dev["inner 1"]["ts"] <= mm[0]["ts"] + 0.01
    # The same calls as torch.cuda.nvtx's.
    import torch.cuda.nvtx as cuda_nvtx
    for name in nvtx.__all__:
        assert hasattr(cuda_nvtx, name)


def test_memory_history_together_with_the_profiler(device):
    torch.musa.memory._record_memory_history(max_entries=1000)
    try:
        with profile(activities=ACTIVITIES, profile_memory=True) as prof:
            a = torch.empty(3000, device=device)
            b = a + 1
            del a
            torch.musa.synchronize()
        snapshot = torch.musa.memory._snapshot()
    finally:
        torch.musa.memory._record_memory_history(enabled=None)
    mem = [e for e in prof.profiler.kineto_results.events()
           if e.name() == "[memory]" and e.device_type() == DeviceType.PrivateUse1]
    trace = [t for t in snapshot["device_traces"][0] if t["action"] in ("alloc", "free_requested")]
    # Both saw the same blocks: the profiler's allocations are the history's last allocations.
    allocs = [e.nbytes() for e in mem if e.nbytes() > 0]
    assert allocs and [t["size"] for t in trace if t["action"] == "alloc"][-len(allocs):] == allocs
    frees = [-e.nbytes() for e in mem if e.nbytes() < 0]
    assert [t["size"] for t in trace if t["action"] == "free_requested"][-len(frees):] == frees
    assert b.shape == (3000,)


def compiled_region_names(device):
    from torch.profiler import record_function as rf

    def f(x):
        with rf("inside compiled"):
            y = x.sin() + 1
        return y * 2

    torch._dynamo.reset()
    cf = torch.compile(f)
    x = torch.randn(16, device=device)
    cf(x)
    musa = torch.device(device).type == "musa"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.PrivateUse1] if musa else [])
    with profile(activities=acts) as prof:
        with record_function("around call"):
            y = cf(x)
        torch.musa.synchronize() if musa else None
    torch.testing.assert_close(y.cpu(), f(x.cpu()))
    # (without the graph's hash: "... fx<hash>", or "## Call CompiledFxGraph <hash> ##" from the FX cache)
    # (the cache key first: it may itself start with "fx")
    names = {re.sub(r"(CompiledFxGraph) \w+", r"\1", e.name).split(" fx")[0] for e in prof.events()
             if e.device_type == DeviceType.CPU and ("compiled" in e.name.lower() or "around" in e.name)}
    return sorted(names), prof


def test_record_function_inside_a_compiled_region(device):
    # torch.compile drops a record_function range inside the compiled region (Dynamo warns that
    # it is ignored) and marks the region itself; musa gets what the native device gets.
    names, prof = compiled_region_names(device)
    # (against the CPU: Inductor's CUDA codegen is not for a process with torch_musa's musa backend)
    native, _ = compiled_region_names("cpu")
    assert names == native and any(n.startswith("Torch-Compiled Region") for n in names)
    if not HOST:  # the compiled Triton kernels, traced by CUPTI (the host driver runs its
        assert device_events(prof)  # compiled CPU graph outside the timed launches)
