"""What one page of virtual-memory management costs through the musa runtime.

    python3 bench/vmm_cost.py [--pages 128] [--sizes 1,4,16,64]

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


def measure(rt, page, n):
    """us per page of each call, for n pages of `page` bytes."""
    def ok(code, what):
        if code != 0:
            raise SystemExit(f"{what} failed with musa error {code}")

    base = ctypes.c_void_p()
    ok(rt["reserve"](ctypes.byref(base), page * n * 2, page), "reserve")
    b = base.value
    handles = [ctypes.c_ulonglong() for _ in range(n)]
    rows = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        fn()
        rows[name] = (time.perf_counter() - t0) / n * 1e6

    timed("create", lambda: [ok(rt["create"](ctypes.byref(h), page, 0), "create") for h in handles])
    timed("map", lambda: [ok(rt["map"](b + i * page, page, 0, handles[i]), "map") for i in range(n)])
    timed("set access, per page", lambda: [ok(rt["access"](b + i * page, page, 0), "access") for i in range(n)])
    timed("unmap", lambda: [ok(rt["unmap"](b + i * page, page), "unmap") for i in range(n)])
    hi = b + n * page
    timed("map again (same pages)", lambda: [ok(rt["map"](hi + i * page, page, 0, handles[i]), "map") for i in range(n)])
    timed("set access, one call", lambda: ok(rt["access"](hi, page * n, 0), "access"))
    timed("unmap again", lambda: [ok(rt["unmap"](hi + i * page, page), "unmap") for i in range(n)])
    timed("release", lambda: [ok(rt["release"](h.value), "release") for h in handles])
    ok(rt["free_va"](b, page * n * 2), "address free")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=128, help="pages per size (fewer for large pages)")
    ap.add_argument("--sizes", default="1,4,16,64",
                    help="page sizes in multiples of the allocation granularity")
    args = ap.parse_args()
    torch.musa.init()
    rt = runtime()
    g = ctypes.c_size_t()
    if rt["granularity"](ctypes.byref(g), 0) != 0:
        raise SystemExit("granularity query failed")
    mults = [int(m) for m in args.sizes.split(",")]
    # Same bytes for every size (capped at the smallest size's total), so costs
    # that grow with bytes rather than with calls show up per MiB.
    total = g.value * args.pages
    results = []
    for m in mults:
        page = g.value * m
        n = max(4, total // page)
        results.append((page, n, measure(rt, page, n)))
    print(f"musa driver: {torch.musa.get_driver_name()}; granularity {g.value >> 20} MiB")
    names = list(results[0][2])
    head = "".join(f"{f'{p >> 20} MiB x{n}':>16}" for p, n, _ in results)
    print(f"{'us per page (us per MiB)':<26}{head}")
    for name in names:
        cells = "".join(f"{r[name]:>8.1f} ({r[name] / (p >> 20):>5.2f})" for p, _, r in results)
        print(f"{name:<26}{cells}")


if __name__ == "__main__":
    main()
