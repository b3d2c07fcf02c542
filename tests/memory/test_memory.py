"""Caching allocator statistics and control, compared with torch.cuda.memory's documented semantics."""
import gc

import pytest
import torch

MiB = 1 << 20


def _settle():
    gc.collect()
    torch.musa.synchronize()


def test_memory_allocated_tracks_tensor_lifetime():
    _settle()
    base = torch.musa.memory_allocated()
    x = torch.empty(MiB // 4, dtype=torch.float32, device="musa")  # exactly 1 MiB
    assert torch.musa.memory_allocated() - base == 1 * MiB
    y = torch.empty(3 * MiB, dtype=torch.uint8, device="musa")
    assert torch.musa.memory_allocated() - base == 4 * MiB
    del x
    assert torch.musa.memory_allocated() - base == 3 * MiB
    del y
    assert torch.musa.memory_allocated() == base


def test_allocation_rounding_like_cuda():
    # CUDA's caching allocator rounds every block up to a multiple of 512 bytes.
    _settle()
    base = torch.musa.memory_allocated()
    x = torch.empty(1, dtype=torch.uint8, device="musa")
    assert torch.musa.memory_allocated() - base == 512
    del x


def test_reserved_at_least_allocated_and_cached_after_free():
    _settle()
    x = torch.empty(8 * MiB, dtype=torch.uint8, device="musa")
    assert torch.musa.memory_reserved() >= torch.musa.memory_allocated() >= 8 * MiB
    reserved = torch.musa.memory_reserved()
    del x
    # freed blocks stay cached (reserved) until empty_cache()
    assert torch.musa.memory_reserved() == reserved
    torch.musa.empty_cache()
    assert torch.musa.memory_reserved() < reserved
    assert torch.musa.memory_reserved() >= torch.musa.memory_allocated()


def test_cached_block_is_reused():
    _settle()
    torch.musa.empty_cache()
    x = torch.empty(4 * MiB, dtype=torch.uint8, device="musa")
    ptr = x.data_ptr()
    reserved = torch.musa.memory_reserved()
    del x
    y = torch.empty(4 * MiB, dtype=torch.uint8, device="musa")
    assert y.data_ptr() == ptr
    assert torch.musa.memory_reserved() == reserved


def test_peak_stats_and_reset():
    _settle()
    torch.musa.reset_peak_memory_stats()
    base = torch.musa.memory_allocated()
    assert torch.musa.max_memory_allocated() == base
    x = torch.empty(16 * MiB, dtype=torch.uint8, device="musa")
    del x
    assert torch.musa.max_memory_allocated() >= base + 16 * MiB
    assert torch.musa.max_memory_reserved() >= torch.musa.max_memory_allocated()
    torch.musa.reset_peak_memory_stats()
    assert torch.musa.max_memory_allocated() == torch.musa.memory_allocated()


def test_memory_stats_keys_like_cuda():
    _settle()
    x = torch.empty(MiB, dtype=torch.uint8, device="musa")
    stats = torch.musa.memory_stats()
    for key in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
                "allocated_bytes.all.freed", "reserved_bytes.all.current", "active_bytes.all.current",
                "allocation.all.current", "segment.all.current", "num_alloc_retries", "num_ooms"):
        assert key in stats, key
    assert stats["allocated_bytes.all.current"] == torch.musa.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.musa.memory_reserved()
    assert stats["allocation.all.current"] >= 1
    del x


def test_accumulated_stats_count_allocations():
    _settle()
    torch.musa.reset_accumulated_memory_stats()
    s0 = torch.musa.memory_stats()
    xs = [torch.empty(1024, device="musa") for _ in range(5)]
    del xs
    s1 = torch.musa.memory_stats()
    assert s1["allocation.all.allocated"] - s0["allocation.all.allocated"] == 5
    assert s1["allocation.all.freed"] - s0["allocation.all.freed"] == 5


def test_mem_get_info_matches_properties():
    free, total = torch.musa.mem_get_info()
    assert total == torch.musa.get_device_properties(0).total_memory
    assert 0 < free <= total
    torch.musa.empty_cache()
    free0, _ = torch.musa.mem_get_info()
    x = torch.empty(32 * MiB, dtype=torch.uint8, device="musa")
    free1, _ = torch.musa.mem_get_info()
    assert free0 - free1 >= 32 * MiB
    del x
    torch.musa.empty_cache()
    # the 32 MiB came back (within what other processes on a real device might change meanwhile)
    assert abs(torch.musa.mem_get_info()[0] - free0) < 16 * MiB


def test_memory_summary_is_text():
    s = torch.musa.memory_summary()
    assert isinstance(s, str) and "Allocated" in s


def test_stats_per_device(two_devices):
    _settle()
    b0, b1 = torch.musa.memory_allocated(0), torch.musa.memory_allocated(1)
    x = torch.empty(2 * MiB, dtype=torch.uint8, device="musa:1")
    assert torch.musa.memory_allocated(1) - b1 == 2 * MiB
    assert torch.musa.memory_allocated(0) == b0
    assert torch.musa.memory_allocated("musa:1") == torch.musa.memory_allocated(torch.device("musa", 1))
    del x
    assert torch.musa.memory_allocated(1) == b1


def test_record_stream_delays_reuse():
    # torch.cuda semantics: a block used on another stream is not reused before that stream's work completes.
    _settle()
    base = torch.musa.memory_allocated()
    s = torch.musa.Stream()
    x = torch.empty(MiB, dtype=torch.uint8, device="musa")
    with torch.musa.stream(s):
        x.add_(1)
    x.record_stream(s)
    del x
    torch.musa.synchronize()
    y = torch.empty(MiB, dtype=torch.uint8, device="musa")
    assert torch.musa.memory_allocated() - base == MiB  # x's block was freed once s finished
    y.fill_(3)
    assert int(y.sum().item()) == 3 * MiB


def test_set_per_process_memory_fraction_limits():
    total = torch.musa.get_device_properties(0).total_memory
    try:
        torch.musa.set_per_process_memory_fraction(0.01)
        with pytest.raises(torch.musa.OutOfMemoryError):
            torch.empty(int(total * 0.05), dtype=torch.uint8, device="musa")
        x = torch.empty(MiB, dtype=torch.uint8, device="musa")
        del x
    finally:
        torch.musa.set_per_process_memory_fraction(1.0)
    with pytest.raises(TypeError):
        torch.musa.set_per_process_memory_fraction(1)


def test_caching_allocator_disabled_gives_freed_memory_back(device):
    # torch.cuda's caching_allocator_enable(False): a freed segment goes back to the device at once;
    # turned on again, freed memory is cached as before. Private pools keep theirs.
    with torch.musa.caching_allocator_disabled():
        before = torch.musa.memory_reserved()  # (segments other live tensors use stay)
        free_before = torch.musa.mem_get_info()[0]
        x = torch.empty(8 << 20, device=device)
        with_x = torch.musa.memory_reserved()
        assert with_x > before
        small = [torch.empty(100, device=device) for _ in range(2)]  # in one small segment
        new_small_segment = torch.musa.memory_reserved() - with_x
        del x
        assert torch.musa.memory_reserved() == before + new_small_segment
        small.pop()
        assert torch.musa.memory_reserved() == before + new_small_segment  # the segment holds the other
        small.pop()
        assert torch.musa.memory_reserved() == before
        if torch.musa.get_driver_name() == "host":  # the device's own count (a GPU's moves with other users)
            assert torch.musa.mem_get_info()[0] == free_before
        pool = torch.musa.MemPool()
        with torch.musa.use_mem_pool(pool):
            y = torch.empty(1 << 20, device=device)
        del y
        assert torch.musa.memory_reserved() > before  # the pool's segment stays the pool's
        del pool
    torch.musa.empty_cache()
    before = torch.musa.memory_reserved()
    z = torch.empty(8 << 20, device=device)
    del z
    assert torch.musa.memory_reserved() > before  # cached again


def test_no_musa_memory_caching_variable_starts_with_caching_off(run_py):
    r = run_py("""
        import torch, torch_musa
        x = torch.empty(8 << 20, device="musa")
        assert torch.musa.memory_reserved() > 0
        del x
        print(torch.musa.memory_reserved())
    """, env={"PYTORCH_NO_MUSA_MEMORY_CACHING": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "0"
