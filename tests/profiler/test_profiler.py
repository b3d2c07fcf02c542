"""torch.profiler on musa: device events measured on the device, linked to the CPU ops that
launched them, one track per musa stream, device-time tables, exports, memory events, and the
legacy per-op timer. The reference is what torch.profiler gives for CUDA: the same event kinds,
columns and trace layout. These run on the host driver in CI and on the GPU (cuda driver), where
the kernels, copies and memsets are CUPTI's (named by kernel, one track per CUDA stream under the
musa streams) and musa adds its graph replays."""
import json
import os
import time

import pytest
import torch
import torch.distributed as dist
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function, schedule

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
        # The device work of the c10d ops. On the host, mccl's launch of each. On cuda, NCCL's work
        # as CUPTI sees it: at world 1 NCCL skips an in-place collective and copies an out-of-place
        # one's input to its output, so the all-gather is a device copy.
        work = [(e, op["name"]) for e, op in device_work(trace) if op and op["name"].startswith("c10d::")]
        if HOST:
            assert [e["name"] for e, _ in work] == ["mccl:all_reduce", "mccl:all_gather_into_tensor"]
        else:
            assert work and all("allgather" in name for _, name in work), work
        assert torch.equal(t.cpu(), torch.arange(16.0)) and torch.equal(out.cpu(), torch.arange(16.0))
    finally:
        dist.destroy_process_group()
