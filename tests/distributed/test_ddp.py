"""DDP over mccl trains like single-process training on the concatenated batch: buckets,
gradient_as_bucket_view, static_graph, find_unused_parameters, comm hooks, PowerSGD, no_sync, and
DDP's timing statistics (the musa reducer timer)."""
import warnings

import pytest

from tests.distributed.launcher import run_ranks, worlds


@pytest.mark.parametrize("world", worlds(2))
def test_ddp_matches_single_process_training(world):
    results = run_ranks("ddp", world, timeout=240)
    for rank, r in enumerate(results):
        assert r["failures"] == [], f"rank {rank}: {r['failures']}"
        for reason in r.get("not_run", []):  # what this torch cannot do (torch_musa/_version_gate.py)
            warnings.warn(reason)
        timing = r["ddp_timing"]
        assert timing["avg_backward_compute_time"] > 0 and timing["avg_forward_compute_time"] > 0, timing
