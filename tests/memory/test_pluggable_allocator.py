"""MemPool(allocator=MUSAPluggableAllocator(...)): a pool whose segments come from a library's own
allocation functions (torch.cuda.MemPool(allocator=CUDAPluggableAllocator(...)) on musa)."""
import ctypes
import os
import subprocess

import pytest
import torch

import torch_musa

# What a user's allocator library looks like: C-linkage functions of the MUSA runtime's shape.
SOURCE = r"""
#include <musa/runtime.h>
#include <sys/types.h>
extern "C" {
long n_alloc = 0, n_free = 0, live_bytes = 0, fail_allocs = 0;
void* my_alloc(ssize_t size, int device, void* stream) {
  if (fail_allocs > 0) { --fail_allocs; return nullptr; }
  int prev = 0;
  musaGetDevice(&prev);
  musaSetDevice(device);
  void* p = nullptr;
  musaError_t err = musaMalloc(&p, static_cast<size_t>(size));
  musaSetDevice(prev);
  if (err != musaSuccess) return nullptr;
  ++n_alloc;
  live_bytes += size;
  return p;
}
void my_free(void* ptr, ssize_t size, int device, void* stream) {
  ++n_free;
  live_bytes -= size;
  musaFree(ptr);
}
}
"""


@pytest.fixture(scope="module")
def allocator_lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("pluggable")
    src, lib = d / "my_alloc.cpp", d / "libmy_alloc.so"
    src.write_text(SOURCE)
    pkg = os.path.dirname(torch_musa.__file__)
    subprocess.run(["c++", "-std=c++17", "-shared", "-fPIC", "-O1", str(src), "-o", str(lib),
                    "-I", os.path.join(pkg, "include"), "-L", pkg, "-lmusart", f"-Wl,-rpath,{pkg}"], check=True)
    return str(lib), ctypes.CDLL(str(lib))


def counter(lib, name):
    return ctypes.c_long.in_dll(lib, name)


def test_pool_segments_come_from_the_library_and_go_back_to_it(allocator_lib, device):
    path, lib = allocator_lib
    alloc = torch.musa.memory.MUSAPluggableAllocator(path, "my_alloc", "my_free")
    pool = torch.musa.MemPool(allocator=alloc)
    assert pool.allocator is alloc.allocator()
    before = counter(lib, "n_alloc").value
    x_cpu = torch.randn(3000)
    with torch.musa.use_mem_pool(pool):
        x = x_cpu.to(device)
        y = torch.sin(x) * 2  # ops write their outputs into the pool's memory too
    assert counter(lib, "n_alloc").value > before
    in_pool = {b["address"] for seg in pool.snapshot() for b in seg["blocks"] if b["state"] == "active_allocated"}
    assert {x.data_ptr(), y.data_ptr()} <= in_pool
    torch.testing.assert_close(y.cpu(), torch.sin(x_cpu) * 2)
    outside = torch.empty(4096, device=device)  # other allocations do not touch the library
    assert outside.data_ptr() not in in_pool
    n = counter(lib, "n_alloc").value
    torch.empty(10, device=device)
    assert counter(lib, "n_alloc").value == n
    # freed blocks stay cached in the pool; emptying the cache hands the segments back
    del x, y
    del pool
    torch.musa.synchronize()
    torch.musa.empty_cache()
    assert counter(lib, "live_bytes").value == 0, "every segment went back to my_free"
    assert counter(lib, "n_free").value == counter(lib, "n_alloc").value


def test_a_null_from_the_library_is_an_out_of_memory_error_naming_it(allocator_lib, device):
    path, lib = allocator_lib
    pool = torch.musa.MemPool(allocator=torch.musa.memory.MUSAPluggableAllocator(path, "my_alloc", "my_free"))
    counter(lib, "fail_allocs").value = 1000  # (the allocator retries after emptying its cache)
    with torch.musa.use_mem_pool(pool):
        with pytest.raises(torch.musa.OutOfMemoryError, match="my_alloc/my_free"):
            torch.empty(1 << 20, device=device)
        counter(lib, "fail_allocs").value = 0
        z = torch.ones(1 << 20, device=device)  # the library recovered: so does the pool
    assert z.sum().item() == 1 << 20


def test_bad_libraries_and_names_are_clear_errors(allocator_lib, tmp_path):
    path, _ = allocator_lib
    with pytest.raises(RuntimeError, match="cannot load"):
        torch.musa.memory.MUSAPluggableAllocator(str(tmp_path / "missing.so"), "my_alloc", "my_free")
    with pytest.raises(RuntimeError, match="has no function 'my_malloc'.*extern"):
        torch.musa.memory.MUSAPluggableAllocator(path, "my_malloc", "my_free")
