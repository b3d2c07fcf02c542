"""torch.profiler on musa: device events measured on the device, linked to the CPU ops that
launched them, one track per musa stream, device-time tables, exports, memory events, and the
legacy per-op timer. The reference is what torch.profiler gives for CUDA: the same event kinds,
columns and trace layout. These run on the host driver in CI and on the GPU (cuda driver)."""
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


def device_events(prof):
    return sorted((e for e in prof.events() if e.device_type == DeviceType.PrivateUse1),
                  key=lambda e: e.time_range.start)


def kernels(prof):
    return [e for e in device_events(prof) if not e.name.startswith(("myrange", "step", "ProfilerStep"))]


def trace_of(prof, tmp_path):
    path = os.path.join(tmp_path, "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f)  # must be valid JSON


def test_known_op_sequence_gives_device_events_in_order(device):
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
    evs = kernels(prof)
    assert [e.name for e in evs] == ["aten::mm", "aten::relu", "aten::sum", "Memcpy DtoH"]
    for e in evs:
        assert e.device_index == 0 and e.device_resource_id == 0  # musa:0, default stream
        assert 0 < e.time_range.elapsed_us() <= wall_us
    # On one stream, device work runs in launch order and does not overlap.
    for a, b in zip(evs, evs[1:]):
        assert a.time_range.end <= b.time_range.start + 1


def test_device_events_link_to_the_cpu_ops_that_launched_them(device):
    x = torch.randn(64, 64, device=device)
    with profile(activities=ACTIVITIES) as prof:
        (x @ x).tanh_()
        torch.musa.synchronize()
    cpu = {e.id: e for e in prof.events() if e.device_type == DeviceType.CPU}
    evs = kernels(prof)
    assert len(evs) == 2
    for e in evs:
        op = cpu[e.linked_correlation_id]
        assert op.name == e.name
        # The device ran it after the CPU launched it.
        assert e.time_range.start >= op.time_range.start - 1
    # The CPU op carries its device time, as CUDA's do.
    mm = next(e for e in prof.events() if e.name == "aten::mm" and e.device_type == DeviceType.CPU)
    assert mm.self_device_time_total > 0


def test_two_streams_are_two_tracks(device, tmp_path):
    x = torch.randn(128, 128, device=device)
    side = torch.musa.Stream()
    side.wait_stream(torch.musa.current_stream())
    with profile(activities=ACTIVITIES) as prof:
        a = x @ x
        with torch.musa.stream(side):
            b = x * 3
        torch.musa.synchronize()
    by_name = {e.name: e for e in kernels(prof)}
    assert by_name["aten::mm"].device_resource_id == torch.musa.current_stream().stream_id
    assert by_name["aten::mul"].device_resource_id == side.stream_id != 0
    trace = trace_of(prof, tmp_path)
    tracks = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
              if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == 0}
    assert tracks[0] == "musa stream 0" and tracks[side.stream_id] == f"musa stream {side.stream_id}"
    kernel_tids = {e["tid"] for e in trace["traceEvents"] if e.get("cat") == "kernel"}
    assert kernel_tids == {0, side.stream_id}
    assert torch.equal(b.cpu(), x.cpu() * 3) and a.shape == (128, 128)


def test_chrome_trace_has_the_musa_process_and_linked_kernels(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    with profile(activities=ACTIVITIES) as prof:
        x.cpu()
        (x + 1).sum()
        torch.musa.synchronize()
    trace = trace_of(prof, tmp_path)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert "musa 0" in names
    cats = {e["cat"] for e in trace["traceEvents"] if e.get("pid") == 0 and e.get("ph") == "X"}
    assert {"kernel", "gpu_memcpy"} <= cats
    cpu_ids = {e["args"].get("External id") for e in trace["traceEvents"]
               if e.get("cat") == "cpu_op"}
    for e in trace["traceEvents"]:
        if e.get("cat") in ("kernel", "gpu_memcpy"):
            assert e["args"]["External id"] in cpu_ids and e["dur"] > 0


def test_fills_are_memsets(device):
    t = torch.empty(1000, device=device)
    with profile(activities=ACTIVITIES) as prof:
        t.zero_()
        torch.musa.synchronize()
    trace_kinds = [e for e in kernels(prof) if e.name == "aten::zero_" or e.name == "aten::fill_"]
    assert trace_kinds, [e.name for e in kernels(prof)]
    assert torch.count_nonzero(t.cpu()) == 0


def test_record_function_ranges_on_both_sides(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    with profile(activities=ACTIVITIES) as prof:
        with record_function("myrange"):
            y = (x @ x).relu()
        z = y + 1
        torch.musa.synchronize()
    trace = trace_of(prof, tmp_path)
    cpu = [e for e in trace["traceEvents"] if e.get("name") == "myrange" and e.get("cat") == "user_annotation"]
    dev = [e for e in trace["traceEvents"] if e.get("name") == "myrange" and e.get("cat") == "gpu_user_annotation"]
    assert len(cpu) == 1 and len(dev) == 1 and dev[0]["pid"] == 0
    inside = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"] in ("aten::mm", "aten::relu")]
    add = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"] == "aten::add")
    start, end = dev[0]["ts"], dev[0]["ts"] + dev[0]["dur"]
    for e in inside:
        assert start - 0.01 <= e["ts"] and e["ts"] + e["dur"] <= end + 0.01
    assert add["ts"] >= end - 0.01  # outside the range
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
        trace = json.load(f)
    assert sum(e.get("cat") == "kernel" and e["name"] == "aten::mm" for e in trace["traceEvents"]) == 2


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
    names = [e.name for e in kernels(prof)]
    assert "MUSAGraph replay" in names
    torch.testing.assert_close(y.cpu(), (x.cpu() @ x.cpu()).relu(), rtol=1e-4, atol=1e-4)


def test_collective_is_a_device_event(device):
    dist.init_process_group("mccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        t = torch.ones(16, device=device)
        with profile(activities=ACTIVITIES) as prof:
            dist.all_reduce(t)
            torch.musa.synchronize()
        assert "mccl:all_reduce" in [e.name for e in kernels(prof)]
        assert torch.equal(t.cpu(), torch.ones(16))
    finally:
        dist.destroy_process_group()
