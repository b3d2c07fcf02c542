"""Instructions per musa op, counted by valgrind's callgrind: a per-op cost that does not
depend on how fast the CPU happens to run (this 2-core machine's speed is bimodal, so
timings of two builds taken minutes apart differ by more than the change being measured).

    python3 bench/op_instructions.py [--ops mul,muls,mul_,add_out,sum,mean,relu,mm,addmm,cat,index_select,where,empty,to_cpu,from_cpu,pinned] [--n 2000] [--against DIR]

Each op runs --n times on 256 floats under callgrind, with instrumentation on only around
the loop. The table gives instructions per op for the op's Python call (its dispatch, the
op layer, the kernel and the output's allocation) and for freeing its result, for this
checkout and, with --against, for another build of torch_musa (a directory whose
`torch_musa` package is built, e.g. a `git worktree` of an older commit built in place).
Instruction counts are no timings: cache misses and branch mispredictions are not in
them, and glibc's malloc may take its slow path in one process and not in another. Use
them to find where a build's per-op path grew, and confirm with bench/op_overhead.py.
Needs valgrind (callgrind_control, callgrind_annotate).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# The Python entry of each op and what frees its result ("" when it allocates none).
OPS = {
    "mul": ("y = x * z", "THPVariable_mul(", "THPVariable_dealloc("),
    "muls": ("y = x * 1.0001", "THPVariable_mul(", "THPVariable_dealloc("),
    "mul_": ("x.mul_(1.0)", "THPVariable_mul_(", ""),
    "add_out": ("torch.add(x, z, out=out)", "THPVariable_add(", ""),
    "sum": ("y = x.sum()", "THPVariable_sum(", "THPVariable_dealloc("),
    "mean": ("y = x.mean()", "THPVariable_mean(", "THPVariable_dealloc("),
    "relu": ("y = torch.relu(x)", "THPVariable_relu(", "THPVariable_dealloc("),
    "mm": ("y = torch.mm(m, m)", "THPVariable_mm(", "THPVariable_dealloc("),
    "cat": ("y = torch.cat([x, z])", "THPVariable_cat(", "THPVariable_dealloc("),
    "index_select": ("y = x.index_select(0, i)", "THPVariable_index_select(", "THPVariable_dealloc("),
    "addmm": ("y = torch.addmm(v, m, m)", "THPVariable_addmm(", "THPVariable_dealloc("),
    "where": ("y = torch.where(b, x, z)", "THPVariable_where(", "THPVariable_dealloc("),
    # the factory alone: the device allocator's allocate and free, every functional op's floor
    "empty": ("y = torch.empty(256, device=x.device)", "THPVariable_empty(", "THPVariable_dealloc("),
    # blocking copies both ways, and a pinned host allocation (the pinned cache's hit path)
    "to_cpu": ("y = x.cpu()", "THPVariable_cpu(", "THPVariable_dealloc("),
    "from_cpu": ("y = c.to(musa)", "THPVariable_to(", "THPVariable_dealloc("),
    "pinned": ("y = torch.empty(256, pin_memory=True)", "THPVariable_empty(", "THPVariable_dealloc("),
}


def worker(op, n, device):
    import torch
    import torch_musa  # noqa: F401

    x = torch.randn(256, device=device)
    z = torch.randn(256, device=device)
    out = torch.empty_like(x)
    code = compile(f"for _ in range(k):\n    {OPS[op][0]}\n", "<ops>", "exec")
    scope = {"torch": torch, "x": x, "z": z, "out": out, "c": torch.randn(256), "musa": torch.device("musa"),
             "m": torch.randn(16, 16, device=device), "i": torch.arange(0, 256, 4, device=device),
             "v": torch.randn(16, device=device), "b": x > 0}
    exec(code, {**scope, "k": 200})
    pid = str(os.getpid())
    subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
    exec(code, {**scope, "k": n})
    subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)


def count(op, n, pythonpath, device):
    """(instructions per op call, per free of its result) in a fresh process."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        env = dict(os.environ, TORCH_MUSA_DRIVER="host")
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                        sys.executable, os.path.abspath(__file__), "--worker", op, "--n", str(n),
                        "--device", device],
                       env=env, check=True, capture_output=True)
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                              check=True, capture_output=True, text=True).stdout
    _, call, free = OPS[op]

    def inclusive(name):
        if not name:
            return 0.0
        for line in text.splitlines():
            if name in line and "TypeError_to_NotImplemented" not in line:
                m = re.match(r"\s*([\d,]+)", line)
                if m:
                    return int(m.group(1).replace(",", "")) / n
        return float("nan")

    return inclusive(call), inclusive(free)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="mul,muls,mul_,add_out")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--against", default=None, help="a directory holding another built torch_musa package")
    ap.add_argument("--device", default="musa", help="musa, or cpu for the native reference")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.n, args.device)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    builds = [("this", root)] + ([("against", os.path.abspath(args.against))] if args.against else [])
    print(f"instructions per op on {args.device} (host driver, 256 floats, {args.n} ops under callgrind)")
    head = f"{'op':<26}" + "".join(f"{b + ' call':>14}{b + ' free':>14}" for b, _ in builds)
    print(head + (f"{'difference':>12}" if args.against else ""))
    for op in args.ops.split(","):
        got = [count(op, args.n, path, args.device) for _, path in builds]
        row = f"{OPS[op][0]:<26}" + "".join(f"{c:>14.0f}{f:>14.0f}" for c, f in got)
        if args.against:
            row += f"{sum(got[0]) - sum(got[1]):>+12.0f}"
        print(row)


if __name__ == "__main__":
    main()
