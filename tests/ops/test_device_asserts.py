"""torch._assert_async and device-side asserts on musa raise, as on the CPU (at the call) or
on CUDA (at the next synchronization). On the cuda driver a device-side assert leaves the CUDA
context unusable, as with torch.cuda, so each case runs in its own process."""
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
    out = r.stdout.strip().splitlines()[-1]
    assert out.startswith("RAISED"), out
    if case == "assert_async_msg" and torch.musa.get_driver_name() == "host":
        assert "musa says no" in out  # the CPU kernel's message, as on the CPU
