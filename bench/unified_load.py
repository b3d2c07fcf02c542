"""torch.load(map_location="musa") with and without unified memory (docs/unified_memory.md).

    python3 bench/unified_load.py [--mib 128] [--rounds 3]

Loads a checkpoint of --mib MiB of float32 weights from memory, alternating plain and unified
loads, and prints each load's time, the device memory it allocated at its peak, and the bytes
musa storages use in place (unified_device_bytes). On the cuda driver it also times one pass of
a musa op over the loaded weights, which reads mapped host memory over PCIe when unified.
"""
import argparse
import gc
import io
import statistics
import time

import torch
import torch_musa


def load(buf, unified):
    gc.collect()
    torch.musa.synchronize()
    torch.musa.empty_cache()
    torch.musa.reset_peak_memory_stats()
    base = torch.musa.memory_allocated()
    buf.seek(0)
    t = time.perf_counter()
    if unified:
        with torch_musa.use_unified_cpu_allocator():
            out = torch.load(buf, map_location="musa")
    else:
        out = torch.load(buf, map_location="musa")
    torch.musa.synchronize()
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    for v in out.values():
        v.sum()
    torch.musa.synchronize()
    read_s = time.perf_counter() - t
    peak = torch.musa.max_memory_allocated() - base
    in_place = torch.musa.memory_stats()["unified_device_bytes.all.current"]
    return load_s, read_s, peak, in_place


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    n = a.mib // 4  # 4 MiB tensors
    buf = io.BytesIO()
    torch.save({f"w{i}": torch.randn(1024, 1024) for i in range(n)}, buf)
    torch.musa.init()
    print(f"driver={torch.musa.get_driver_name()} checkpoint={a.mib} MiB rounds={a.rounds}")
    res = {False: [], True: []}
    for _ in range(a.rounds):
        for unified in (False, True):
            res[unified].append(load(buf, unified))
    for unified, rows in res.items():
        med = [statistics.median(r[i] for r in rows) for i in range(2)]
        print(f"{'unified' if unified else 'plain  '}: load {med[0]*1e3:7.1f} ms  read {med[1]*1e3:7.1f} ms  "
              f"device peak +{rows[-1][2] / 2**20:.0f} MiB  in place {rows[-1][3] / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
