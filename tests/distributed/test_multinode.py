"""Two nodes simulated on one machine: two `torchrun --nnodes 2 --nproc-per-node 2` side by side, met
through the c10d rendezvous on 127.0.0.1, train DDP, FSDP2 and HSDP (replicated across the nodes,
sharded within one) over mccl like one process on the full batch (tests/distributed/multinode.py).
Host driver only: each node's ranks take emulated devices 0 and 1 by LOCAL_RANK."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from tests.distributed.launcher import REPO_ROOT, assert_no_failures, driver, free_port

NODES, PER_NODE, TIMEOUT = 2, 2, 90


def torchrun(node, port, out_dir):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MUSA_VISIBLE_DEVICES", "TORCH_DISTRIBUTED_DEBUG", "MASTER_ADDR", "MASTER_PORT")}
    env.update(TORCH_MUSA_DRIVER="host", TORCH_MUSA_HOST_DEVICES=str(PER_NODE), OMP_NUM_THREADS="1",
               PYTHONUNBUFFERED="1", MCCL_DUMP_AFTER=str(TIMEOUT - 10))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(NODES), "--nproc-per-node", str(PER_NODE),
           "--node-rank", str(node), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
           "--rdzv-id", f"mccl-multinode-{port}", "--rdzv-conf", f"is_host={int(node == 0)}",
           "--local-addr", "127.0.0.1", "--max-restarts", "0", "--monitor-interval", "0.1",
           "-m", "tests.distributed.multinode", out_dir]
    log = open(os.path.join(out_dir, f"node{node}.log"), "w")
    # its own session, so a timeout ends the agent and its workers together
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True), log


@pytest.mark.skipif(driver() != "host", reason="two ranks per node need two devices: the host driver emulates them")
def test_ddp_and_fsdp2_across_two_torchrun_nodes_match_single_process():
    with tempfile.TemporaryDirectory(prefix="mccl_multinode_") as out_dir:
        port = free_port()
        nodes = [torchrun(n, port, out_dir) for n in range(NODES)]
        deadline, timed_out = time.monotonic() + TIMEOUT, False
        for p, log in nodes:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.close()
        logs = "\n".join(f"--- node {n} (exit {p.returncode}) ---\n" +
                         open(os.path.join(out_dir, f"node{n}.log")).read()[-5000:] for n, (p, _) in enumerate(nodes))
        assert not timed_out, f"torchrun ran past {TIMEOUT} s\n{logs}"
        assert all(p.returncode == 0 for p, _ in nodes), logs
        world = NODES * PER_NODE
        results = [json.load(open(os.path.join(out_dir, f"{r}.json"))) for r in range(world)]
    assert_no_failures(results)
    # every rank of the world ran, each node's ranks on its devices 0..PER_NODE-1 by LOCAL_RANK
    assert [r["world"] for r in results] == [world] * world
    placement = sorted((r["node"], r["device"]) for r in results)
    assert placement == [(n, d) for n in range(NODES) for d in range(PER_NODE)], placement
    # FSDP2 shards over all four ranks; HSDP replicates across the nodes and shards within one
    assert {(r["fsdp2 placements"], r["hsdp placements"]) for r in results} == {("(Shard(dim=0),)",
                                                                                 "(Replicate(), Shard(dim=0))")}
