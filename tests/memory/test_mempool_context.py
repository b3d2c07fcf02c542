"""MemPoolContext: the per-thread active MemPool (torch_musa's API; older torch.cuda's), routing
the thread's allocations to the pool like use_mem_pool."""
import threading

import pytest
import torch


def test_context_routes_allocations_and_reports_the_active_pool(device):
    pool = torch.musa.MemPool()
    assert torch.musa.MemPoolContext.active_pool() is None
    with torch.musa.MemPoolContext(pool) as ctx:
        assert torch.musa.MemPoolContext.active_pool() is pool and isinstance(ctx, torch.musa.MemPoolContext)
        inner = torch.musa.MemPool()
        with torch.musa.MemPoolContext(inner):
            assert torch.musa.MemPoolContext.active_pool() is inner
        assert torch.musa.MemPoolContext.active_pool() is pool
        x = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    assert torch.musa.MemPoolContext.active_pool() is None
    in_pool = {b["address"] for seg in pool.snapshot() for b in seg["blocks"] if b["state"] == "active_allocated"}
    assert x.data_ptr() in in_pool  # allocated from the pool's own segments
    y = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    assert y.data_ptr() not in in_pool


def test_active_pool_is_per_thread(device):
    pool = torch.musa.MemPool()
    seen = []
    with torch.musa.MemPoolContext(pool):
        t = threading.Thread(target=lambda: seen.append(torch.musa.MemPoolContext.active_pool()))
        t.start()
        t.join()
    assert seen == [None]


def test_bad_argument():
    with pytest.raises(TypeError, match="MemPool"):
        torch.musa.MemPoolContext("pool")


def test_pool_allocator_is_none_and_foreign_ones_are_refused_clearly(device):
    assert torch.musa.MemPool().allocator is None  # as torch.cuda.MemPool() without an allocator
    with pytest.raises(TypeError, match="MUSAPluggableAllocator"):
        torch.musa.MemPool(allocator=object())


def test_a_context_is_active_from_its_making_until_it_is_deleted(device):
    # as torch.cuda's MemPoolContext (torch 2.5-2.7) and torch_musa's: no `with` needed
    pool = torch.musa.MemPool()
    ctx = torch.musa.MemPoolContext(pool)
    assert torch.musa.MemPoolContext.active_pool() is pool
    x = torch.empty(1 << 20, dtype=torch.uint8, device=device)
    del ctx
    assert torch.musa.MemPoolContext.active_pool() is None
    in_pool = {b["address"] for seg in pool.snapshot() for b in seg["blocks"] if b["state"] == "active_allocated"}
    assert x.data_ptr() in in_pool
    assert torch.empty(1 << 20, dtype=torch.uint8, device=device).data_ptr() not in in_pool


def test_threads_each_activate_their_own_pool(device):
    made, active = [], []

    def work():
        pool = torch.musa.MemPool()
        ctx = torch.musa.MemPoolContext(pool)
        made.append(pool.id)
        active.append(torch.musa.MemPoolContext.active_pool().id)
        del ctx
        active.append(torch.musa.MemPoolContext.active_pool())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 4 and sorted(a for a in active if a is not None) == sorted(made)
    assert active.count(None) == 4
