"""FSDP2 with FP8 all-gather on 2 host ranks: matches the bf16 all-gather run and moves half the
all-gather bytes (counted by mccl)."""
import pytest

from tests.distributed.launcher import assert_no_failures, run_ranks, worlds


@pytest.mark.parametrize("world", worlds(2))
def test_fsdp2_float8_all_gather(world):
    results = run_ranks("fsdp_float8", world, timeout=240, module="tests.fp8.fsdp_scenarios")
    assert_no_failures(results)
    b = results[0]["bytes"]
    assert all(2 * x == y for x, y in zip(b["fp8 precomputed"], b["bf16"])), b
