"""Every collective and dtype class through mccl, in separate rank processes, against CPU references
(tests/distributed/scenarios.py: scenario_collectives)."""
import pytest

from tests.distributed.launcher import assert_no_failures, driver, run_ranks, worlds


@pytest.mark.parametrize("world", worlds(2, 4))
def test_every_collective_matches_the_cpu_reference(world):
    results = run_ranks("collectives", world, timeout=240)
    assert_no_failures(results)
    for r in results:
        assert r["backend"] == "mccl"
        # the decision's defaults: the cross-rank check is on for Gloo (host), off for NCCL (cuda)
        assert r["checks_collectives"] == (driver() == "host" and world > 1)
