"""Pinned host memory is cached as CUDA's is (ATen's CachingHostAllocator): a freed pinned block is
reused by the next allocation of its size once the musa streams that used it are past it."""
import pytest
import torch


def test_freed_pinned_block_is_reused(device):
    # Served from the cache: no new host allocation. (Not necessarily the block just freed: the
    # cache may hold other free blocks of the size, e.g. the cuda driver's copy staging, in CUDA's.)
    a = torch.empty(9 << 20, dtype=torch.uint8, pin_memory=True)
    assert a.is_pinned()
    del a
    before = torch.musa.host_memory_stats()
    b = torch.empty(9 << 20, dtype=torch.uint8, pin_memory=True)
    after = torch.musa.host_memory_stats()
    assert b.is_pinned()
    assert after["num_host_alloc"] == before["num_host_alloc"]
    assert after["allocated_bytes.current"] == before["allocated_bytes.current"]


def test_block_in_an_async_copy_waits_for_the_copy(device):
    src = torch.arange(1 << 18, dtype=torch.float32).pin_memory()
    ptr = src.data_ptr()
    side = torch.musa.Stream()
    with torch.musa.stream(side):
        torch.musa._sleep(100_000_000)  # keep the copy's stream busy (~100 ms on the host driver)
        dst = src.to(device, non_blocking=True)
    del src
    other = torch.empty(1 << 18, dtype=torch.float32, pin_memory=True)
    busy = not side.query()
    assert busy or torch.musa.get_driver_name() == "cuda"  # (a GPU's spin may already be over)
    if busy:
        assert other.data_ptr() != ptr  # still in use by the copy: not handed out again
    side.synchronize()
    torch.testing.assert_close(dst.cpu(), torch.arange(1 << 18, dtype=torch.float32))
    other_ptr = other.data_ptr()
    del other
    again = torch.empty(1 << 18, dtype=torch.float32, pin_memory=True)
    assert again.data_ptr() in (ptr, other_ptr)  # a cached block, now that the copy is done


def test_host_memory_stats_count_the_cache_as_torch_cuda_s(device):
    # torch.cuda.host_memory_stats' keys and meaning: bytes handed out (active) return to 0 when
    # the tensor dies, bytes the cache holds (allocated) stay; resets clear peaks and totals.
    keys = {f"{stat}.{kind}" for stat in ("allocations", "allocated_bytes", "active_requests", "active_bytes")
            for kind in ("current", "peak", "allocated", "freed")}
    keys |= {f"host_{op}_time.{kind}" for op in ("alloc", "free") for kind in ("total", "max", "min", "count", "avg")}
    keys |= {"num_host_alloc", "num_host_free"}
    before = torch.musa.host_memory_stats()
    assert set(before) == keys
    a = torch.empty(3 << 20, dtype=torch.uint8, pin_memory=True)  # a size no other test caches
    during = torch.musa.host_memory_stats()
    assert during["active_bytes.current"] - before["active_bytes.current"] >= a.numel()
    assert during["active_requests.current"] == before["active_requests.current"] + 1
    del a
    after = torch.musa.host_memory_stats()
    assert after["allocated_bytes.current"] == during["allocated_bytes.current"]  # cached, not freed
    if torch.musa.get_driver_name() == "host":
        assert after["active_bytes.current"] == before["active_bytes.current"]
    # (On the cuda driver the cache is CUDA's own, the one torch's pin_memory=True uses, and these are
    # its figures as torch.cuda reads them; its free settles a block's active count on its own terms.)
    b = torch.empty(3 << 20, dtype=torch.uint8, pin_memory=True)
    again = torch.musa.host_memory_stats()
    assert again["num_host_alloc"] == during["num_host_alloc"]  # the cached block served it
    assert again["allocated_bytes.current"] == during["allocated_bytes.current"]
    del b
    torch.musa.reset_accumulated_host_memory_stats()
    torch.musa.reset_peak_host_memory_stats()
    reset = torch.musa.host_memory_stats()
    assert reset["active_bytes.allocated"] == 0 and reset["active_bytes.peak"] == reset["active_bytes.current"]
    assert torch.musa.host_memory_stats_as_nested_dict()["active_bytes"]["current"] == reset["active_bytes.current"]


def test_accelerator_empty_host_cache_frees_the_pinned_cache_musa_uses(device):
    # torch reaches musa's host allocator through its registry (torch.accelerator.empty_host_cache):
    # it must be the cache musa's pinned memory comes from (CUDA's, on the cuda driver).
    empty_host_cache = getattr(torch.accelerator, "empty_host_cache", None)
    if empty_host_cache is None:
        pytest.skip(f"torch {torch.__version__} has no torch.accelerator.empty_host_cache")
    a = torch.empty(5 << 20, dtype=torch.uint8, pin_memory=True)  # a size no other test caches
    a.fill_(1)
    del a
    torch.musa.synchronize()
    held = torch.musa.host_memory_stats()["allocated_bytes.current"]
    empty_host_cache()
    assert torch.musa.host_memory_stats()["allocated_bytes.current"] <= held - (5 << 20)
