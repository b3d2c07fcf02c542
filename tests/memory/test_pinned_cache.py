"""Pinned host memory is cached as CUDA's is (ATen's CachingHostAllocator): a freed pinned block is
reused by the next allocation of its size once the musa streams that used it are past it."""
import torch


def test_freed_pinned_block_is_reused(device):
    a = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
    assert a.is_pinned()
    ptr = a.data_ptr()
    del a
    b = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
    assert b.data_ptr() == ptr and b.is_pinned()


def test_block_in_an_async_copy_waits_for_the_copy(device):
    src = torch.arange(1 << 18, dtype=torch.float32).pin_memory()
    ptr = src.data_ptr()
    side = torch.musa.Stream()
    with torch.musa.stream(side):
        torch.musa._sleep(20_000_000)  # keep the copy's stream busy (cuda driver)
        dst = src.to(device, non_blocking=True)
    del src
    other = torch.empty(1 << 18, dtype=torch.float32, pin_memory=True)
    if not side.query():
        assert other.data_ptr() != ptr  # still in use by the copy: not handed out again
    side.synchronize()
    torch.testing.assert_close(dst.cpu(), torch.arange(1 << 18, dtype=torch.float32))
    other_ptr = other.data_ptr()
    del other
    again = torch.empty(1 << 18, dtype=torch.float32, pin_memory=True)
    assert again.data_ptr() in (ptr, other_ptr)  # a cached block, now that the copy is done
