"""Bad input and faults: clear errors that name the op, timeouts instead of hangs, nothing leaked."""
import pytest

from tests.distributed.launcher import assert_no_failures, driver, run_ranks

pytestmark = pytest.mark.skipif(driver() != "host", reason="needs 2 ranks: the multi-GPU suite runs these on GPUs")


def test_mismatches_raise_naming_the_op_and_the_group_stays_usable():
    results = run_ranks("faults", 2, timeout=120, args=("mismatch",))
    assert_no_failures(results)
    for r in results:
        before, after = r["memory_allocated"]
        assert after == before, f"destroy_process_group left {after - before} bytes of musa memory"
        t_before, t_after = r["threads"]
        assert t_after <= t_before + 1, f"threads before init {t_before}, after destroy {t_after}"


@pytest.mark.parametrize("fault", ["die", "hang"])
def test_lost_rank_gives_an_error_within_the_timeout(fault):
    results = run_ranks("faults", 2, timeout=90, args=(fault,), expect_fail=(1,))
    r = results[0]
    assert r["failures"] == [], r["failures"]
    assert r["error"], "rank 0 got no error"
    assert r["seconds"] < 5 + 10, f"the error took {r['seconds']:.1f} s with a 5 s group timeout"
