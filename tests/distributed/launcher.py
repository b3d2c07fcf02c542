"""Runs a scenario of tests/distributed/scenarios.py in `world` processes, one rank each.

Each rank is a fresh interpreter on the host driver with one emulated device of its own (as one
rank per GPU), wired by MASTER_ADDR/MASTER_PORT like torchrun; each writes its findings as JSON.
A rank that hangs past `timeout` fails the test instead of hanging CI.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def driver() -> str:
    """The driver the ranks use: host (CI), or cuda in the GPU suite (TORCH_MUSA_DIST_DRIVER=cuda)."""
    return os.environ.get("TORCH_MUSA_DIST_DRIVER", "host")


def worlds(*sizes):
    """World sizes to test: as given on the host driver; 1 on the GPU machine (NCCL takes one rank per
    GPU, and it has one; runs across GPUs belong to the multi-GPU suite)."""
    return list(sizes) if driver() == "host" else [1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(scenario, world, timeout=120, env=None, args=(), expect_fail=(), module="tests.distributed.scenarios"):
    """Runs `python -m module scenario *args` as `world` ranks; returns their JSON results (a list, by
    rank). Raises AssertionError with the ranks' output if a rank fails (unless it is in
    `expect_fail`) or the run outlives `timeout`. (bench/dist_bench.py runs its workers through it too.)"""
    port = free_port()
    out_dir = tempfile.mkdtemp(prefix=f"mccl_{scenario}_")
    try:  # the run's logs and results are read here; the folder goes afterwards
        procs = []
        for rank in range(world):
            e = dict(os.environ)
            for k in ("TORCH_MUSA_HOST_DEVICES", "MUSA_VISIBLE_DEVICES", "TORCH_DISTRIBUTED_DEBUG"):
                e.pop(k, None)
            e.update(TORCH_MUSA_DRIVER=driver(), TORCH_MUSA_HOST_DEVICES="1",
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                     LOCAL_RANK=str(rank) if driver() == "cuda" else "0",
                     OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", MCCL_RESULT=os.path.join(out_dir, f"{rank}.json"),
                     MCCL_DUMP_AFTER=str(max(1, timeout - 5)))
            e.update(env or {})
            log = open(os.path.join(out_dir, f"{rank}.log"), "w")
            procs.append((subprocess.Popen([sys.executable, "-m", module, scenario, *args],
                                           cwd=REPO_ROOT, env=e, stdout=log, stderr=subprocess.STDOUT), log))
        deadline = time.monotonic() + timeout
        timed_out = False
        for p, _ in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        for p, log in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()

        def logs():
            return "\n".join(f"--- rank {r} (exit {p.returncode}) ---\n" + open(os.path.join(out_dir, f"{r}.log")).read()[-4000:]
                             for r, (p, _) in enumerate(procs))

        assert not timed_out, f"scenario {scenario} at world {world} ran past {timeout} s\n{logs()}"
        for r, (p, _) in enumerate(procs):
            if r not in expect_fail:
                assert p.returncode == 0, f"rank {r} of scenario {scenario} failed\n{logs()}"
        results = []
        for r in range(world):
            path = os.path.join(out_dir, f"{r}.json")
            results.append(json.load(open(path)) if os.path.exists(path) else None)
        return results
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def assert_no_failures(results):
    """Every rank found its results equal to the references; what this torch cannot run
    (torch_musa/_version_gate.py) is reported as a warning."""
    for rank, r in enumerate(results):
        assert r["failures"] == [], f"rank {rank}: {r['failures']}"
        for reason in r.get("not_run", []):
            warnings.warn(reason)
