"""The caching allocator in classic and expandable-segment modes: bookkeeping, growth in place,
empty_cache, record_stream, OOM recovery, MemPool, torch.accelerator.memory, stats keys like torch.cuda."""
import gc
import re

import pytest
import torch

from tests.conftest import run_python

MiB = 1 << 20


@pytest.fixture(params=["classic", "expandable"])
def mode(request):
    before = torch.musa.memory._get_allocator_settings()["PYTORCH_MUSA_ALLOC_CONF"]
    gc.collect()
    torch.musa.synchronize()
    torch.musa.empty_cache()
    torch.musa._C._replace_allocator_settings(f"expandable_segments:{request.param == 'expandable'}")
    yield request.param
    gc.collect()
    torch.musa.synchronize()
    torch.musa.empty_cache()
    torch.musa._C._replace_allocator_settings(before)


def _stats():
    return torch.musa.memory_stats()


def test_bookkeeping_returns_to_zero(mode):
    base = _stats()
    ts = []
    for i, n in enumerate([100, 5 * MiB, 700, 30 * MiB, MiB, 3 * MiB + 5, 64 * MiB, 12345]):
        ts.append(torch.empty(n, dtype=torch.uint8, device="musa"))
        if i % 3 == 2:
            del ts[0]
    s = _stats()
    assert s["allocation.all.current"] - base["allocation.all.current"] == len(ts)
    assert s["reserved_bytes.all.current"] >= s["allocated_bytes.all.current"]
    assert s["requested_bytes.all.current"] <= s["allocated_bytes.all.current"]
    del ts
    gc.collect()
    s = _stats()
    for k in ("allocation", "active", "allocated_bytes", "active_bytes", "requested_bytes"):
        assert s[f"{k}.all.current"] == base[f"{k}.all.current"], k
    torch.musa.empty_cache()
    s = _stats()
    if base["allocated_bytes.all.current"] == 0:
        # no leaked blocks: nothing reserved, no segments, no split leftovers
        for k in ("reserved_bytes", "segment", "inactive_split", "inactive_split_bytes"):
            assert s[f"{k}.all.current"] == 0, (k, s[f"{k}.all.current"])
        assert torch.musa.memory.memory_snapshot() == []


def test_expandable_grows_in_place_and_unmaps_on_empty_cache(mode):
    if mode != "expandable":
        pytest.skip("expandable only")
    torch.musa.empty_cache()
    base = torch.musa.memory_reserved()  # what earlier tests left live (on a GPU: library work spaces)
    a = torch.empty(40 * MiB, dtype=torch.uint8, device="musa")
    b = torch.empty(40 * MiB, dtype=torch.uint8, device="musa")
    # the second block continues the same virtual range: the segment grew in place
    assert b.data_ptr() == a.data_ptr() + 40 * MiB
    segs = torch.musa.memory.memory_snapshot()
    seg = [s for s in segs if s["address"] <= a.data_ptr() < s["address"] + s["total_size"]][0]
    assert seg["is_expandable"] and seg["total_size"] >= 80 * MiB
    free0 = torch.musa.mem_get_info()[0]
    a_ptr = a.data_ptr()
    del a, b
    torch.musa.empty_cache()
    assert torch.musa.memory_reserved() == base
    assert torch.musa.mem_get_info()[0] >= free0 + 80 * MiB  # physical pages went back to the device
    c = torch.empty(40 * MiB, dtype=torch.uint8, device="musa")
    assert c.data_ptr() == a_ptr  # ... but the address range was kept
    c.fill_(7)
    assert int(c[-1].item()) == 7


def test_expandable_maps_extents_not_pages(mode):
    # Growth maps one physical allocation per run of up to 24 MiB (each mapping costs ~25 us on a GPU
    # whatever its size); an extent with a live block in it stays mapped, the rest is unmapped.
    if mode != "expandable":
        pytest.skip("expandable only")
    torch.musa.empty_cache()
    base = torch.musa.memory_reserved()  # what earlier tests left live (on a GPU: library work spaces)
    before = _stats()["num_device_alloc"]
    a = torch.empty(64 * MiB, dtype=torch.uint8, device="musa")
    mapped = _stats()["num_device_alloc"] - before
    assert 1 <= mapped <= 3, mapped  # 32 pages of 2 MiB, in extents of <= 24 MiB
    ref = torch.arange(64 * MiB, dtype=torch.int64).remainder_(251).to(torch.uint8)
    a.copy_(ref)  # one tensor across several extents reads back whole
    assert torch.equal(a.cpu(), ref)
    del a
    small = torch.empty(2 * MiB, dtype=torch.uint8, device="musa")  # lands in the cached range
    torch.musa.empty_cache()
    reserved = torch.musa.memory_reserved() - base
    assert 2 * MiB <= reserved <= 24 * MiB, reserved  # one extent, not the 64 MiB
    small.fill_(3)
    assert int(small.sum().item()) == 3 * 2 * MiB
    del small
    torch.musa.empty_cache()
    assert torch.musa.memory_reserved() == base


def test_expandable_growth_near_capacity_needs_no_retry():
    # Near the device's capacity a growth must not fail because physical memory it just unmapped
    # (kept for reuse, but of another length) is still held: 254 of 256 MiB fit without a retry.
    r = run_python("""
        import torch, torch_musa
        MiB = 1 << 20
        small = [torch.empty(MiB, dtype=torch.uint8, device="musa") for _ in range(30)]
        a = torch.empty(10 * MiB, dtype=torch.uint8, device="musa")
        b = torch.empty(200 * MiB, dtype=torch.uint8, device="musa")
        del a
        c = torch.empty(24 * MiB, dtype=torch.uint8, device="musa")
        c.fill_(5)
        assert int(c[-1].item()) == 5
        print(torch.musa.memory_stats()["num_alloc_retries"], torch.musa.memory_reserved() // MiB)
    """, env={"TORCH_MUSA_HOST_MEMORY": "256MiB", "PYTORCH_MUSA_ALLOC_CONF": "expandable_segments:True"})
    assert r.returncode == 0, r.stderr
    retries, reserved = map(int, r.stdout.split())
    assert retries == 0 and reserved <= 256, (retries, reserved)


def test_expandable_reserved_tracks_allocated(mode):
    if mode != "expandable":
        pytest.skip("expandable only")
    torch.musa.reset_peak_memory_stats()
    live = []
    for i in range(40):
        live.append(torch.empty((1 + (i * 7) % 23) * MiB, dtype=torch.uint8, device="musa"))
        if i % 3 == 0:
            del live[len(live) // 2]
    peak_alloc, peak_res = torch.musa.max_memory_allocated(), torch.musa.max_memory_reserved()
    assert peak_res <= peak_alloc * 1.1 + 4 * MiB


def test_record_stream(mode):
    base = torch.musa.memory_allocated()
    s = torch.musa.Stream()
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="musa")
    ptr = x.data_ptr()
    with torch.musa.stream(s):
        x.fill_(1)
    x.record_stream(s)
    del x
    snap = torch.musa.memory.memory_snapshot()
    states = {b["address"]: b["state"] for seg in snap for b in seg["blocks"]}
    # freed on the allocating stream, but pending until s's work is done (or already done: host driver is eager)
    assert states.get(ptr) in ("active_pending_free", "inactive")
    torch.musa.synchronize()
    y = torch.empty(4 * MiB, dtype=torch.uint8, device="musa")
    assert torch.musa.memory_allocated() - base == 4 * MiB
    assert y.data_ptr() == ptr
    del y


def test_oom_catch_free_continue(mode):
    r = run_python(f"""
        import gc, torch, torch_musa
        M = 1 << 20
        torch.musa.memory._set_allocator_settings("expandable_segments:{mode == 'expandable'}")
        keep = [torch.empty(40 * M, dtype=torch.uint8, device="musa") for _ in range(4)]
        cached = torch.empty(60 * M, dtype=torch.uint8, device="musa"); del cached
        x = torch.empty(90 * M, dtype=torch.uint8, device="musa")   # needs the cached 60 MiB back: retry path
        try:
            torch.empty(200 * M, dtype=torch.uint8, device="musa")
            print("NO-OOM")
        except torch.musa.OutOfMemoryError as e:
            print("MSG", str(e).replace("\\n", " "))
        s = torch.musa.memory_stats()
        print("STATS", s["num_ooms"], s["num_alloc_retries"] >= 1)
        del keep, x
        gc.collect()
        y = torch.empty(200 * M, dtype=torch.uint8, device="musa")
        y.fill_(3)
        print("OK", int(y[-1].item()), torch.musa.memory_allocated() // M)
    """, env={"TORCH_MUSA_HOST_MEMORY": "256MiB"})
    assert r.returncode == 0, r.stderr
    msg = re.search(r"MSG (.*)", r.stdout).group(1)
    assert "Tried to allocate 200.00 MiB" in msg
    assert "total capacity of 256.00 MiB" in msg and "is free" in msg
    assert "is allocated by PyTorch" in msg and "reserved by PyTorch but unallocated" in msg
    if mode == "classic":
        assert "expandable_segments:True" in msg
    assert "STATS 1 True" in r.stdout
    assert "OK 3 200" in r.stdout


def test_mem_pool(mode):
    base = torch.musa.memory_allocated()
    pool = torch.musa.memory.MemPool()
    assert pool.use_count() == 1
    with torch.musa.memory.use_mem_pool(pool):
        assert pool.use_count() == 2
        x = torch.empty(3 * MiB, dtype=torch.uint8, device="musa")
        y = torch.empty(1000, device="musa")
    z = torch.empty(3 * MiB, dtype=torch.uint8, device="musa")
    assert pool.use_count() == 1
    segs = pool.snapshot()
    addrs = {b["address"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated"}
    assert x.data_ptr() in addrs and y.data_ptr() in addrs and z.data_ptr() not in addrs
    assert all(s["segment_pool_id"] == pool.id for s in segs)
    stats = torch.musa.memory_stats()
    key = "reserved_bytes_by_private_pools.%d_%d.all.current" % pool.id
    assert stats[key] >= 3 * MiB
    del x, y
    # freed blocks return to the pool, not the default pools
    with torch.musa.memory.use_mem_pool(pool):
        x2 = torch.empty(3 * MiB, dtype=torch.uint8, device="musa")
    assert x2.data_ptr() in addrs
    del x2, z
    pid = pool.id
    del pool
    gc.collect()
    assert torch.musa.memory_stats()["reserved_bytes_by_private_pools.%d_%d.all.current" % pid] == 0
    assert torch.musa.memory_allocated() == base


def test_stats_keys_match_torch_cuda():
    # The keys torch.cuda.memory_stats() documents (and memory_summary reads), with no extras.
    x = torch.empty(MiB, dtype=torch.uint8, device="musa")
    # reserved_bytes_by_private_pools.<id>.* appear per MemPool, as in torch.cuda; unified_* are
    # unified memory's (docs/unified_memory.md), the only keys torch.cuda lacks
    keys = {k for k in torch.musa.memory_stats() if not k.startswith(("reserved_bytes_by_private_pools.", "unified_"))}
    doc = torch.cuda.memory.memory_stats.__doc__
    expected = set()
    for name in ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
                 "active_bytes", "inactive_split_bytes", "requested_bytes"):
        for pool in ("all", "large_pool", "small_pool"):
            for m in ("current", "peak", "allocated", "freed"):
                expected.add(f"{name}.{pool}.{m}")
    for name in ("oversize_allocations", "oversize_segments"):
        for m in ("current", "peak", "allocated", "freed"):
            expected.add(f"{name}.{m}")
    for k in re.findall(r'``"(num_[a-z_]+|max_split_size)"``', doc):
        expected.add(k)
    assert keys == expected, (keys ^ expected)
    # torch.accelerator.memory sees the same allocator
    acc = torch.accelerator.memory_stats()
    assert acc["allocated_bytes.all.current"] == torch.musa.memory_allocated()
    assert torch.accelerator.memory_allocated() == torch.musa.memory_allocated()
    assert torch.accelerator.memory_reserved() == torch.musa.memory_reserved()
    assert tuple(torch.accelerator.get_memory_info()) == torch.musa.mem_get_info()
    del x
    torch.accelerator.empty_cache()
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == torch.musa.memory_allocated()


def test_caching_allocator_alloc_delete(mode):
    base = torch.musa.memory_allocated()
    p = torch.musa.memory.caching_allocator_alloc(5 * MiB)
    assert torch.musa.memory_allocated() - base == 5 * MiB
    torch.musa.memory.caching_allocator_delete(p)
    assert torch.musa.memory_allocated() == base
    with pytest.raises(RuntimeError, match="not allocated"):
        torch.musa.memory.caching_allocator_delete(p)


def test_memory_summary_layout():
    s = torch.musa.memory_summary()
    assert "PyTorch MUSA memory summary" in s and "Allocated memory" in s and "from large pool" in s
    assert "Oversize allocations" in s
