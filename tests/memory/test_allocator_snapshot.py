"""Memory history and snapshots in torch.cuda's pickle structure, rendered by torch.cuda._memory_viz."""
import gc
import pickle

import pytest
import torch
from torch.cuda import _memory_viz

MiB = 1 << 20


@pytest.fixture
def history():
    torch.musa.memory._record_memory_history(max_entries=100000, clear_history=True)
    yield
    torch.musa.memory._record_memory_history(enabled=None)


def _make_some_memory():
    keep = [torch.empty(n, dtype=torch.uint8, device="musa") for n in (300, 2 * MiB, 25 * MiB)]
    tmp = torch.empty(7 * MiB, dtype=torch.uint8, device="musa")
    del tmp
    return keep


def test_snapshot_structure_like_cuda(history):
    keep = _make_some_memory()
    s = torch.musa.memory._snapshot()
    assert set(s) >= {"segments", "device_traces"}
    assert len(s["device_traces"]) == torch.musa.device_count()
    for seg in s["segments"]:
        assert {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
                "segment_type", "segment_pool_id", "is_expandable", "blocks"} <= set(seg)
        assert seg["segment_type"] in ("small", "large")
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
        for b in seg["blocks"]:
            assert {"address", "size", "requested_size", "state", "frames"} <= set(b)
            assert b["state"] in ("active_allocated", "active_pending_free", "inactive")
    live = {b["address"] for seg in s["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"}
    assert all(t.data_ptr() in live for t in keep)
    actions = [e["action"] for e in s["device_traces"][0]]
    assert {"alloc", "free_requested", "free_completed"} <= set(actions)
    assert {"segment_alloc", "segment_map"} & set(actions)
    alloc = [e for e in s["device_traces"][0] if e["action"] == "alloc" and e["addr"] == keep[2].data_ptr()][-1]
    assert alloc["size"] >= 25 * MiB and {"stream", "time_us", "frames"} <= set(alloc)
    # Python frames of the allocation site are recorded
    assert any(f["name"] == "_make_some_memory" and f["filename"].endswith("test_allocator_snapshot.py")
               for f in alloc["frames"])


def test_dump_snapshot_renders_in_memory_viz(history, tmp_path):
    keep = _make_some_memory()
    path = tmp_path / "musa_snapshot.pickle"
    torch.musa.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        data = pickle.load(f)
    assert isinstance(data, dict)
    html = _memory_viz.trace_plot(data)
    assert "<html" in html.lower() or "<!doctype" in html.lower() or len(html) > 1000
    assert len(_memory_viz.segment_plot(data)) > 1000
    assert "total_reserved" in _memory_viz.segsum(data)
    _memory_viz.trace(data)
    flame = _memory_viz.segments(data, format_flamegraph=lambda x: x)
    assert "active_allocated" in flame
    assert "active_allocated" in _memory_viz.memory(data, format_flamegraph=lambda x: x)
    assert _memory_viz.compare(data["segments"], data["segments"], format_flamegraph=lambda x: x) is not None
    del keep


def test_snapshot_with_expandable_segments(history):
    before = torch.musa.memory._get_allocator_settings()["PYTORCH_MUSA_ALLOC_CONF"]
    gc.collect()
    torch.musa.empty_cache()
    torch.musa.memory._set_allocator_settings("expandable_segments:True")
    try:
        keep = _make_some_memory()
        s = torch.musa.memory._snapshot()
        exp = [seg for seg in s["segments"] if seg["is_expandable"]]
        assert exp
        assert "segment_map" in [e["action"] for e in s["device_traces"][0]]
        _memory_viz.segment_plot(s)
        _memory_viz.trace_plot(s)
        del keep
        gc.collect()
        torch.musa.empty_cache()
        s = torch.musa.memory._snapshot()
        assert "segment_unmap" in [e["action"] for e in s["device_traces"][0]]
        assert not [seg for seg in s["segments"] if seg["is_expandable"]]
    finally:
        gc.collect()
        torch.musa.empty_cache()
        torch.musa._C._replace_allocator_settings(before)


def test_history_off_records_nothing():
    torch.musa.memory._record_memory_history(enabled=None)
    n0 = len(torch.musa.memory._snapshot()["device_traces"][0])
    x = torch.empty(MiB, device="musa")
    s = torch.musa.memory._snapshot()
    assert len(s["device_traces"][0]) == n0
    blk = [b for seg in s["segments"] for b in seg["blocks"] if b["address"] == x.data_ptr()][0]
    assert blk["frames"] == []
    del x


def test_state_only_keeps_stacks_without_history():
    torch.musa.memory._record_memory_history("state", stacks="python", clear_history=True)
    try:
        x = torch.empty(MiB, device="musa")
        s = torch.musa.memory._snapshot()
        assert all(not t for t in s["device_traces"])
        blk = [b for seg in s["segments"] for b in seg["blocks"] if b["address"] == x.data_ptr()][0]
        assert blk["frames"] and all(set(f) >= {"filename", "line", "name"} for f in blk["frames"])
    finally:
        torch.musa.memory._record_memory_history(enabled=None)


def test_ring_buffer_max_entries():
    torch.musa.memory._record_memory_history(max_entries=10, clear_history=True)
    try:
        for _ in range(20):
            t = torch.empty(1000, device="musa")
            del t
        s = torch.musa.memory._snapshot()
        assert len(s["device_traces"][0]) == 10
        times = [e["time_us"] for e in s["device_traces"][0]]
        assert times == sorted(times)
    finally:
        torch.musa.memory._record_memory_history(enabled=None)


def test_legacy_bool_signature():
    torch.musa.memory._record_memory_history(True, trace_alloc_max_entries=5)
    torch.musa.memory._record_memory_history(False)


@pytest.mark.parametrize("stacks", ["all", "python"])
def test_cpp_frames_only_with_stacks_all(stacks):
    """As torch.cuda: stacks="all" adds the C++ frames (the allocator, the op that allocated) to the
    Python ones; stacks="python" records Python frames only."""
    torch.musa.memory._record_memory_history(context="all", stacks=stacks, clear_history=True)
    try:
        x = torch.randn(1000, device="musa")
        trace = [t for t in torch.musa.memory._snapshot()["device_traces"][0] if t["action"] == "alloc"
                 and t["addr"] == x.data_ptr()]
        frames = trace[-1]["frames"]
        cpp = [f for f in frames if f["filename"].endswith((".cpp", ".h")) or "::" in f["name"]]
        python = [f for f in frames if f["filename"].endswith(".py")]
        assert python and any("test_allocator_snapshot.py" in f["filename"] for f in python)
        if stacks == "all":
            assert any("torch_musa::" in f["name"] for f in cpp), [f["name"] for f in frames][:10]
        else:
            assert not cpp
    finally:
        torch.musa.memory._record_memory_history(enabled=None)
