"""Multithreaded alloc/free stress on the caching allocator (classic and expandable): no crash, no leak."""
import gc
import random
import threading

import pytest
import torch

import torch_musa

MiB = 1 << 20


@pytest.mark.parametrize("expandable", [False, True])
def test_threads_alloc_free(expandable):
    before = torch.musa.memory._get_allocator_settings()["PYTORCH_MUSA_ALLOC_CONF"]
    gc.collect()
    torch.musa.empty_cache()
    torch.musa._C._replace_allocator_settings(f"expandable_segments:{expandable}")
    base = torch.musa.memory_stats()
    errors = []
    n_threads, n_ops = 6, 1500
    streams = [torch.musa.Stream() for _ in range(2)]

    def worker(seed):
        rng = random.Random(seed)
        live = []
        try:
            for i in range(n_ops):
                if live and (rng.random() < 0.45 or len(live) > 30):
                    t = live.pop(rng.randrange(len(live)))
                    if rng.random() < 0.1:
                        t.record_stream(streams[rng.randrange(2)])
                    del t
                    continue
                n = rng.choice([rng.randint(1, 4096), rng.randint(4096, MiB), rng.randint(MiB, 24 * MiB)])
                if rng.random() < 0.2:
                    with torch.musa.stream(streams[seed % 2]):
                        t = torch.empty(n, dtype=torch.uint8, device="musa")
                else:
                    t = torch.empty(n, dtype=torch.uint8, device="musa")
                t[:1].fill_(seed)
                live.append(t)
                if i % 500 == 0:
                    torch.musa.empty_cache()
            live.clear()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    try:
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        gc.collect()
        torch.musa.synchronize()
        torch.musa.empty_cache()  # also completes frees still waiting on record_stream events
        s = torch.musa.memory_stats()
        for k in ("allocation", "active", "allocated_bytes", "requested_bytes"):
            assert s[f"{k}.all.current"] == base[f"{k}.all.current"], k
        assert s["allocation.all.allocated"] - base["allocation.all.allocated"] >= n_threads * n_ops // 2
        if base["allocated_bytes.all.current"] == 0:
            assert torch.musa.memory_reserved() == 0
    finally:
        gc.collect()
        torch.musa.empty_cache()
        torch.musa._C._replace_allocator_settings(before)


def test_threads_without_the_gil_contend_for_the_device_lock():
    # C++ threads allocate and free at once (Python threads mostly take turns under the GIL):
    # no block is handed out while another thread holds it, and every block comes back.
    twice, leaked = torch_musa._C._allocator_contention_check(4, 100000)
    assert twice == 0 and leaked == 0
