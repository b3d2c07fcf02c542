"""Every collective and dtype class through mccl, in separate rank processes, against CPU references
(tests/distributed/scenarios.py: scenario_collectives)."""
import warnings

import pytest

from tests.distributed.launcher import run_ranks, worlds


@pytest.mark.parametrize("world", worlds(2, 4))
def test_every_collective_matches_the_cpu_reference(world):
    results = run_ranks("collectives", world, timeout=240)
    for rank, r in enumerate(results):
        assert r["failures"] == [], f"rank {rank}: {r['failures']}"
        for reason in r.get("not_run", []):  # what this torch cannot do (torch_musa/_version_gate.py)
            warnings.warn(reason)
        assert r["backend"] == "mccl"
