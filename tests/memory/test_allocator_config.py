"""PYTORCH_MUSA_ALLOC_CONF parsing and every key's effect, and _set_allocator_settings at run time."""
import gc

import pytest
import torch

from tests.conftest import run_python

MiB = 1 << 20
KEYS = ("expandable_segments", "max_split_size_mb", "garbage_collection_threshold", "roundup_power2_divisions")


@pytest.fixture
def settings():
    """Restores the allocator settings a test changes at run time."""
    before = torch.musa.memory._get_allocator_settings()
    yield torch.musa.memory._set_allocator_settings
    gc.collect()
    torch.musa.empty_cache()
    torch.musa._C._replace_allocator_settings(before["PYTORCH_MUSA_ALLOC_CONF"])


@pytest.mark.parametrize("conf", ["bogus_key:1", "expandable_segments:maybe", "max_split_size_mb:10",
                                  "max_split_size_mb:abc", "max_non_split_rounding_mb:20", "garbage_collection_threshold:1.5",
                                  "roundup_power2_divisions:3", "roundup_power2_divisions:[256:1,128:2]",
                                  "expandable_segments"])
def test_bad_conf_names_accepted_keys(conf):
    r = run_python("""
        import torch, torch_musa
        try:
            torch.empty(10, device="musa")
        except RuntimeError as e:
            print("ERR", e)
    """, env={"PYTORCH_MUSA_ALLOC_CONF": conf})
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "PYTORCH_MUSA_ALLOC_CONF" in r.stdout, r.stdout
    for k in KEYS:
        assert k in r.stdout


def test_bad_runtime_setting_raises_and_keeps_old():
    before = torch.musa.memory._get_allocator_settings()
    with pytest.raises(RuntimeError, match="unknown key 'nope'.*expandable_segments, max_split_size_mb"):
        torch.musa.memory._set_allocator_settings("nope:1")
    assert torch.musa.memory._get_allocator_settings() == before


def test_env_conf_is_read():
    r = run_python("""
        import torch, torch_musa
        torch.empty(1, device="musa")
        s = torch.musa.memory._get_allocator_settings()
        print(s["expandable_segments"], s["max_split_size"], s["garbage_collection_threshold"],
              s["roundup_power2_divisions"][1], s["roundup_power2_divisions"][512], s["roundup_power2_divisions"][1024])
    """, env={"PYTORCH_MUSA_ALLOC_CONF": "expandable_segments:True, max_split_size_mb:64,"
                                         "garbage_collection_threshold:0.6,roundup_power2_divisions:[256:1,512:2,>:8]"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", str(64 * MiB), "0.6", "1", "2", "8"]


@pytest.mark.parametrize("own", [None, "max_split_size_mb:64"])
def test_torch_generic_variable_is_read_where_musa_own_is_not_set(own):
    # PYTORCH_ALLOC_CONF (torch's device-generic variable) as CUDA reads it; keys of other
    # allocators in it are theirs (skipped here), a bad value of a musa key names the variable;
    # PYTORCH_MUSA_ALLOC_CONF, when set, is the one musa reads.
    code = """
        import torch, torch_musa
        try:
            torch.empty(1, device="musa")
            s = torch.musa.memory._get_allocator_settings()
            print(s["expandable_segments"], s["max_split_size"])
        except RuntimeError as e:
            print("ERR", str(e).split(":")[0])
    """
    env = {"PYTORCH_ALLOC_CONF": "backend:native,expandable_segments:True,pinned_use_background_threads:True"}
    if own is not None:
        env["PYTORCH_MUSA_ALLOC_CONF"] = own
    r = run_python(code, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == (["True", "-1"] if own is None else ["False", str(64 * MiB)]), r.stdout
    r = run_python(code, env={"PYTORCH_ALLOC_CONF": "max_split_size_mb:5"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ERR PYTORCH_ALLOC_CONF='max_split_size_mb"), r.stdout


def test_expandable_segments_key(settings):
    settings("expandable_segments:True")
    x = torch.empty(30 * MiB, dtype=torch.uint8, device="musa")
    segs = [s for s in torch.musa.memory.memory_snapshot() if s["address"] <= x.data_ptr() < s["address"] + s["total_size"]]
    assert segs and segs[0]["is_expandable"]
    del x
    gc.collect()
    torch.musa.empty_cache()
    settings("expandable_segments:False")
    y = torch.empty(30 * MiB, dtype=torch.uint8, device="musa")
    segs = [s for s in torch.musa.memory.memory_snapshot() if s["address"] <= y.data_ptr() < s["address"] + s["total_size"]]
    assert segs and not segs[0]["is_expandable"]


def test_max_split_size_mb(settings):
    gc.collect()
    torch.musa.empty_cache()
    settings("max_split_size_mb:40")
    assert torch.musa.memory_stats()["max_split_size"] == 40 * MiB
    big = torch.empty(100 * MiB, dtype=torch.uint8, device="musa")
    assert torch.musa.memory_stats()["oversize_allocations.current"] == 1
    assert torch.musa.memory_stats()["oversize_segments.current"] == 1
    ptr = big.data_ptr()
    del big
    # an oversize cached block is not split for a small request ...
    small = torch.empty(30 * MiB, dtype=torch.uint8, device="musa")
    assert small.data_ptr() != ptr
    # ... but serves a request of about its size
    big2 = torch.empty(95 * MiB, dtype=torch.uint8, device="musa")
    assert big2.data_ptr() == ptr
    del small, big2
    assert torch.musa.memory_stats()["oversize_allocations.current"] == 0


def test_max_non_split_rounding_mb(settings):
    # torch.cuda's rule: an oversize cached block serves a request at most this much smaller than
    # itself (20 MiB by default), so a 100 MiB block serves 50 MiB only with a wider rounding.
    def serves_half(conf):
        gc.collect()
        torch.musa.empty_cache()
        settings(conf)
        big = torch.empty(100 * MiB, dtype=torch.uint8, device="musa")
        ptr = big.data_ptr()
        del big
        half = torch.empty(50 * MiB, dtype=torch.uint8, device="musa")
        return half.data_ptr() == ptr

    assert not serves_half("max_split_size_mb:40")
    assert serves_half("max_split_size_mb:40,max_non_split_rounding_mb:64")
    assert torch.musa.memory._get_allocator_settings()["max_non_split_rounding"] == 64 * MiB


def test_roundup_power2_divisions(settings):
    gc.collect()
    base = torch.musa.memory_allocated()
    settings("roundup_power2_divisions:4")
    x = torch.empty(1200 * 1024, dtype=torch.uint8, device="musa")  # between 1 MiB and 2 MiB: steps of 256 KiB
    assert torch.musa.memory_allocated() - base == 1280 * 1024
    del x
    settings("roundup_power2_divisions:0")
    x = torch.empty(1200 * 1024, dtype=torch.uint8, device="musa")
    assert torch.musa.memory_allocated() - base == 1200 * 1024
    del x


def test_garbage_collection_threshold():
    # Above the threshold (a fraction of the allowed memory), cached blocks are freed before the allocator
    # grows, so it need not hit the limit and flush everything (a retry); without it, it does.
    code = """
        import torch, torch_musa
        M = 1 << 20
        torch.musa.set_per_process_memory_fraction(0.5)   # 128 MiB of 256 MiB allowed
        a = [torch.empty(20 * M, dtype=torch.uint8, device="musa") for _ in range(4)]
        del a                                             # 80 MiB cached
        for _ in range(3):
            t = torch.empty(1 * M, dtype=torch.uint8, device="musa"); del t
        b = torch.empty(60 * M, dtype=torch.uint8, device="musa")
        s = torch.musa.memory_stats()
        print(s["reserved_bytes.all.current"] // M, s["num_alloc_retries"], s["num_ooms"])
    """
    r = run_python(code, env={"PYTORCH_MUSA_ALLOC_CONF": "garbage_collection_threshold:0.5",
                              "TORCH_MUSA_HOST_MEMORY": "256MiB"})
    assert r.returncode == 0, r.stderr
    reserved, retries, ooms = map(int, r.stdout.split())
    assert reserved <= 64 + 2 + 60 and retries == 0 and ooms == 0
    r = run_python(code, env={"TORCH_MUSA_HOST_MEMORY": "256MiB"})
    assert r.returncode == 0, r.stderr
    reserved, retries, ooms = map(int, r.stdout.split())
    assert retries == 1 and ooms == 0


def test_set_allocator_settings_keeps_unnamed_keys(settings):
    settings("max_split_size_mb:64")
    settings("roundup_power2_divisions:2")
    s = torch.musa.memory._get_allocator_settings()
    assert s["max_split_size"] == 64 * MiB and s["roundup_power2_divisions"][1] == 2
