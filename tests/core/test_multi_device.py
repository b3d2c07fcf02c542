"""Several musa devices: placement, device context, cross-device copies, mixed-device errors (as on cuda)."""
import gc

import pytest
import torch
import torch.nn as nn

pytestmark = pytest.mark.usefixtures("two_devices")


def test_tensor_on_musa1():
    cpu = torch.randn(3, 4)
    m = cpu.to("musa:1")
    assert m.device == torch.device("musa", 1) and m.get_device() == 1
    assert torch.equal(m.cpu(), cpu)
    r = (m * 2 + 1).sum(0)
    assert r.device == torch.device("musa", 1)
    torch.testing.assert_close(r.cpu(), (cpu * 2 + 1).sum(0))
    assert torch.ones(2, device=torch.device("musa", 1)).device.index == 1
    assert cpu.musa(1).device.index == 1
    assert cpu.musa("musa:1").device.index == 1


def test_device_context_manager():
    assert torch.musa.current_device() == 0
    with torch.musa.device(1):
        assert torch.musa.current_device() == 1
        t = torch.zeros(2, device="musa")
        assert t.device.index == 1
        with torch.musa.device(0):
            assert torch.musa.current_device() == 0
        assert torch.musa.current_device() == 1
    assert torch.musa.current_device() == 0
    with torch.musa.device("musa:1"):
        assert torch.musa.current_device() == 1
    with torch.musa.device(None):  # like torch.cuda.device(None): no-op
        assert torch.musa.current_device() == 0


def test_set_device_changes_default_placement():
    torch.musa.set_device(1)
    try:
        assert torch.randn(2, device="musa").device.index == 1
        assert torch.tensor([1.0]).musa().device.index == 1
    finally:
        torch.musa.set_device(0)
    assert torch.randn(2, device="musa").device.index == 0


def test_cross_device_copy():
    cpu = torch.randn(64, 33)
    m0 = cpu.musa(0)
    m1 = m0.to("musa:1")
    assert m1.device.index == 1 and m1.data_ptr() != m0.data_ptr()
    assert torch.equal(m1.cpu(), cpu)
    back = torch.empty(64, 33, device="musa:0")
    back.copy_(m1)
    assert torch.equal(back.cpu(), cpu)
    # non-contiguous cross-device copy
    nc = m1.t()[::2]
    assert torch.equal(nc.to("musa:0").cpu(), cpu.t()[::2])
    # non_blocking cross-device copy is ordered like cuda's
    nb = m0.to("musa:1", non_blocking=True)
    torch.musa.synchronize(1)
    assert torch.equal(nb.cpu(), cpu)


def test_dtype_converting_cross_device_copy():
    cpu = torch.randn(10)
    out = cpu.musa(0).to("musa:1", torch.float16)
    assert out.device.index == 1 and out.dtype == torch.float16
    assert torch.equal(out.cpu(), cpu.half())


@pytest.mark.parametrize("op", [
    lambda a, b: a + b,
    lambda a, b: a @ b,
    lambda a, b: torch.cat([a, b]),
    lambda a, b: torch.where(a > 0, a, b),
    lambda a, b: a.add_(b),
])
def test_mixed_musa0_musa1_operands_raise(op):
    a = torch.randn(3, 3, device="musa:0")
    b = torch.randn(3, 3, device="musa:1")
    with pytest.raises(RuntimeError) as e:
        op(a, b)
    msg = str(e.value)
    # cuda: "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!"
    assert "musa:0" in msg and "musa:1" in msg


def test_module_on_musa1_and_grads():
    torch.manual_seed(0)
    ref = nn.Linear(5, 3)
    m = nn.Linear(5, 3)
    m.load_state_dict(ref.state_dict())
    m.to("musa:1")
    x = torch.randn(4, 5)
    out = m(x.to("musa:1"))
    assert out.device.index == 1
    out.sum().backward()
    ref(x).sum().backward()
    assert m.weight.grad.device.index == 1
    torch.testing.assert_close(m.weight.grad.cpu(), ref.weight.grad)
    torch.testing.assert_close(out.detach().cpu(), ref(x).detach())


def test_op_runs_on_its_tensors_device_not_current():
    # cuda executes on the device of the operands, whatever the current device is
    a = torch.randn(8, device="musa:1")
    assert torch.musa.current_device() == 0
    b = a * 3
    assert b.device.index == 1
    torch.testing.assert_close(b.cpu(), a.cpu() * 3)
    assert torch.musa.current_device() == 0


def test_devices_have_separate_memory_accounting():
    gc.collect()  # garbage of earlier tests (a graph's pool in a cycle) must not be freed mid-test
    torch.musa.synchronize(0)
    torch.musa.synchronize(1)
    before0 = torch.musa.memory_allocated(0)
    x = torch.empty(1 << 20, dtype=torch.uint8, device="musa:1")
    assert torch.musa.memory_allocated(0) == before0
    del x


def test_device_properties_per_device():
    p0, p1 = torch.musa.get_device_properties(0), torch.musa.get_device_properties(1)
    assert p0.total_memory > 0 and p1.total_memory > 0
    assert p0.uuid != p1.uuid


def test_synchronize_each_device():
    for i in range(torch.musa.device_count()):
        torch.ones(4, device=f"musa:{i}").add_(1)
        torch.musa.synchronize(i)
