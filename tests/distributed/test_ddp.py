"""DDP over mccl trains like single-process training on the concatenated batch: buckets,
gradient_as_bucket_view, static_graph, find_unused_parameters, comm hooks, PowerSGD, no_sync, and
DDP's timing statistics (the musa reducer timer)."""
import pytest

from tests.distributed.launcher import assert_no_failures, run_ranks, worlds


@pytest.mark.parametrize("world", worlds(2))
def test_ddp_matches_single_process_training(world):
    results = run_ranks("ddp", world, timeout=240)
    assert_no_failures(results)
    for r in results:
        timing = r["ddp_timing"]
        assert timing["avg_backward_compute_time"] > 0 and timing["avg_forward_compute_time"] > 0, timing


@pytest.mark.parametrize("world", worlds(2))
def test_sync_batch_norm_trains_like_batch_norm_on_the_whole_batch(world):
    assert_no_failures(run_ranks("syncbn", world, timeout=240))
