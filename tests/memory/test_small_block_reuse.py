"""The caching allocator's small-block fast path (a freed small block is parked for the next request of
its size on its stream): reuse stays per stream, and stats and snapshots see freed blocks merged, as
torch.cuda's allocator shows them."""
import gc

import torch


def _segment_of(addr):
    segs = [s for s in torch.musa.memory_snapshot() if s["address"] <= addr < s["address"] + s["total_size"]]
    assert len(segs) == 1
    return segs[0]


def test_freed_small_block_is_reused_on_its_stream_only():
    gc.collect()
    x = torch.empty(256, device="musa")
    p = x.data_ptr()
    del x
    y = torch.empty(256, device="musa")
    assert y.data_ptr() == p  # the block just freed serves the next request of its size
    del y
    with torch.musa.stream(torch.musa.Stream()):
        z = torch.empty(256, device="musa")
    assert z.data_ptr() != p  # free on the default stream: not for another stream's work
    z.fill_(2.0)
    assert float(z.sum()) == 512.0


def test_freed_small_blocks_show_merged_in_stats_and_snapshots():
    gc.collect()
    torch.musa.synchronize()
    before = torch.musa.memory_stats()
    with torch.musa.stream(torch.musa.Stream()):  # a stream of its own: a segment of its own
        ts = [torch.empty(n, dtype=torch.uint8, device="musa") for n in (100, 3000, 512, 70000, 100, 3000)]
    addr = ts[0].data_ptr()
    states = {b["address"]: b["state"] for b in _segment_of(addr)["blocks"]}
    assert all(states[t.data_ptr()] == "active_allocated" for t in ts)
    del ts[1], ts[3]  # freed between live blocks
    del ts
    after = torch.musa.memory_stats()
    for k in ("allocation", "allocated_bytes", "active", "active_bytes", "requested_bytes",
              "inactive_split", "inactive_split_bytes"):
        assert after[f"{k}.all.current"] == before[f"{k}.all.current"], k
    seg = _segment_of(addr)
    assert len(seg["blocks"]) == 1 and seg["blocks"][0]["state"] == "inactive"
    assert seg["blocks"][0]["size"] == seg["total_size"]
    torch.musa.reset_peak_memory_stats()
    s = torch.musa.memory_stats()
    for k in ("inactive_split", "inactive_split_bytes", "active_bytes"):
        assert s[f"{k}.all.peak"] == s[f"{k}.all.current"], k
