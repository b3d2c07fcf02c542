"""torch._assert_async on musa raises at the call with the CPU's message, as torch_musa's does (CUDA's
asserts on the device, surfacing at a later synchronization); other device-side asserts raise, at the
call (host driver) or at the next synchronization (cuda driver, as torch.cuda). A device-side assert
leaves the CUDA context unusable, as with torch.cuda, so each case runs in its own process."""
import pytest
import torch

from tests.conftest import run_python

CASES = {
    "assert_async": "torch._assert_async(torch.tensor(0, device='musa'))",
    "assert_async_msg": "torch._assert_async(torch.tensor(False, device='musa'), 'musa says no')",
    "index_out_of_range": "torch.arange(3.0, device='musa')[torch.tensor([7], device='musa')]",
}


def _run(stmt):
    code = f"""
import torch
torch._assert_async(torch.tensor(1, device='musa'))  # a true value passes
torch.musa.synchronize()
try:
    {stmt}
    print("NOT AT THE CALL")
    torch.musa.synchronize()
except (RuntimeError, IndexError) as e:
    print("RAISED", type(e).__name__, str(e).splitlines()[0])
else:
    print("NOT RAISED")
"""
    return run_python(code, env={"TORCH_MUSA_DRIVER": torch.musa.get_driver_name()})


@pytest.mark.parametrize("case", sorted(CASES))
def test_failed_device_asserts_raise(case):
    r = _run(CASES[case])
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-1].startswith("RAISED"), lines
    if case.startswith("assert_async"):  # at the call, with the CPU kernel's message
        assert "NOT AT THE CALL" not in lines
        expected = "musa says no" if case == "assert_async_msg" else "Expected Tensor with single nonzero value"
        assert expected in lines[-1], lines[-1]


def test_assert_async_passes_and_fails_as_on_the_cpu_for_each_dtype(device):
    # torch_musa's own test's dtypes: true values pass, zeros raise the CPU's error
    for value in (1, 1.0, True, 1 + 2j):
        torch._assert_async(torch.tensor([value], device=device))
        torch._assert_async(torch.tensor([value], device=device).half() if isinstance(value, float) else
                            torch.tensor([value], device=device))
    for zero in (0, 0.0, False, 0j):  # (checked at the call: the process stays usable on both drivers)
        with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value, but got zero"):
            torch._assert_async(torch.tensor([zero], device=device))
    assert (torch.ones(2, device=device) + 1).sum().item() == 4
