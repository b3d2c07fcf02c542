"""What one page of virtual-memory management costs through the musa runtime.

    python3 bench/vmm_cost.py [--pages 128]

A diagnostic for the expandable-segment allocator, not a ratio benchmark:
torch has no Python entry to the CUDA driver's VMM calls to compare with, and
the runtime adds only a thin layer over them. It times musaMemCreate, Map,
SetAccess (per page and one call over all pages), Unmap and Release on
granularity-sized pages of the active driver (host or cuda) and prints us per
page. Figures from the H200 are in docs/performance.md.
"""
import argparse
import ctypes
import glob
import os
import time

import torch
import torch_musa

# The runtime's C++ entry points (its header declares them without C linkage).
SYMBOLS = {
    "create": ("_Z13musaMemCreatePymi", [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t, ctypes.c_int]),
    "release": ("_Z14musaMemReleasey", [ctypes.c_ulonglong]),
    "map": ("_Z10musaMemMapPvmmy", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_ulonglong]),
    "unmap": ("_Z12musaMemUnmapPvm", [ctypes.c_void_p, ctypes.c_size_t]),
    "access": ("_Z16musaMemSetAccessPvmi", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]),
    "reserve": ("_Z21musaMemAddressReservePPvmm", [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]),
    "free_va": ("_Z18musaMemAddressFreePvm", [ctypes.c_void_p, ctypes.c_size_t]),
    "granularity": ("_Z31musaMemGetAllocationGranularityPmi", [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]),
}


def runtime():
    path = glob.glob(os.path.join(os.path.dirname(torch_musa.__file__), "libmusart.so*"))[0]
    lib = ctypes.CDLL(path)
    fns = {}
    for name, (sym, args) in SYMBOLS.items():
        f = getattr(lib, sym)
        f.argtypes, f.restype = args, ctypes.c_int
        fns[name] = f
    return fns


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=128)
    n = ap.parse_args().pages
    torch.musa.init()
    rt = runtime()

    def ok(code, what):
        if code != 0:
            raise SystemExit(f"{what} failed with musa error {code}")

    g = ctypes.c_size_t()
    ok(rt["granularity"](ctypes.byref(g), 0), "granularity")
    page = g.value
    base = ctypes.c_void_p()
    ok(rt["reserve"](ctypes.byref(base), page * n * 2, page), "reserve")
    b = base.value
    handles = [ctypes.c_ulonglong() for _ in range(n)]
    rows = []

    def timed(name, fn):
        t0 = time.perf_counter()
        fn()
        rows.append((name, (time.perf_counter() - t0) / n * 1e6))

    timed("create", lambda: [ok(rt["create"](ctypes.byref(h), page, 0), "create") for h in handles])
    timed("map", lambda: [ok(rt["map"](b + i * page, page, 0, handles[i]), "map") for i in range(n)])
    timed("set access, per page", lambda: [ok(rt["access"](b + i * page, page, 0), "access") for i in range(n)])
    timed("unmap", lambda: [ok(rt["unmap"](b + i * page, page), "unmap") for i in range(n)])
    hi = b + n * page
    timed("map again (same pages)", lambda: [ok(rt["map"](hi + i * page, page, 0, handles[i]), "map") for i in range(n)])
    timed(f"set access, one call for {n}", lambda: ok(rt["access"](hi, page * n, 0), "access"))
    timed("unmap again", lambda: [ok(rt["unmap"](hi + i * page, page), "unmap") for i in range(n)])
    timed("release", lambda: [ok(rt["release"](h.value), "release") for h in handles])
    ok(rt["free_va"](b, page * n * 2), "address free")
    print(f"musa driver: {torch.musa.get_driver_name()}; {n} pages of {page >> 20} MiB")
    print(f"{'call':<28} {'us per page':>11}")
    for name, us in rows:
        print(f"{name:<28} {us:>11.2f}")


if __name__ == "__main__":
    main()
