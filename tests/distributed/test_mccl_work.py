"""What an mccl collective hands back and keeps, in a group of one rank (host driver in CI, cuda on
the GPU): result() and the future give the caller's own tensors, built when asked; buffers reused
from call to call follow their memory; a Work dropped unwaited keeps its buffers until done."""
import time

import pytest
import torch
import torch.distributed as dist

from tests.distributed.launcher import free_port


@pytest.fixture
def group():
    dist.init_process_group("mccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def test_result_and_future_are_the_callers_tensors(group):
    t = torch.arange(6.0, device="musa")
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert w.result()[0] is t
    assert w.get_future().wait()[0] is t
    inp = torch.arange(4.0, device="musa")
    out = torch.empty(4, device="musa")
    w = dist.all_gather_into_tensor(out, inp, async_op=True)
    fut = w.get_future()
    (got,) = fut.wait()  # the outputs only, as NCCL's
    assert got is out and len(w.result()) == 1 and w.result()[0] is out
    torch.testing.assert_close(out.cpu(), torch.arange(4.0))
    # a non-contiguous output is staged: the caller's view comes back, holding the result
    base = torch.zeros(4, 2, device="musa")
    view = base.t()[0]  # stride 2
    w = dist.all_gather_into_tensor(view, inp, async_op=True)
    w.wait()
    assert w.result()[0] is view
    torch.testing.assert_close(base.cpu(), torch.stack([torch.arange(4.0), torch.zeros(4)], 1))


def test_reused_buffers_follow_their_memory(group):
    """Synchronous calls reuse the group's aliases of a buffer while it describes the same memory."""
    out = torch.zeros(8, device="musa")
    for step in range(3):
        src = torch.full((8,), float(step), device="musa")
        dist.all_gather_into_tensor(out, src)
        torch.testing.assert_close(out.cpu(), torch.full((8,), float(step)))
    # the storage's memory goes and comes back elsewhere (FSDP2's resize_ pattern)
    old = out.clone()
    out.untyped_storage().resize_(0)
    out.untyped_storage().resize_(8 * 4)
    dist.all_gather_into_tensor(out, torch.full((8,), 7.0, device="musa"))
    torch.testing.assert_close(out.cpu(), torch.full((8,), 7.0))
    # the tensor moves to other memory; the old memory is left alone
    out.set_(old.untyped_storage(), 0, (8,), (1,))
    dist.all_gather_into_tensor(out, torch.full((8,), 8.0, device="musa"))
    torch.testing.assert_close(old.cpu(), torch.full((8,), 8.0))
    # views of one storage at other offsets and shapes
    whole, ref = torch.zeros(16, device="musa"), torch.zeros(16)
    for lo, n in ((0, 8), (8, 8), (4, 4), (0, 16)):
        dist.all_gather_into_tensor(whole[lo:lo + n], torch.full((n,), float(lo + n), device="musa"))
        ref[lo:lo + n] = float(lo + n)
        torch.testing.assert_close(whole.cpu(), ref)
    whole.resize_(2, 8)  # same memory, another shape
    dist.all_gather_into_tensor(whole, torch.arange(16.0, device="musa"))
    torch.testing.assert_close(whole.cpu(), torch.arange(16.0).view(2, 8))


def test_dropped_async_work_keeps_its_buffers_until_done(group):
    small = torch.ones(1, device="musa")
    dist.all_reduce(small)
    base = torch.musa.memory_allocated()
    t = torch.ones(1 << 20, device="musa")
    dist.all_reduce(t, async_op=True)  # the Work is dropped at once, unwaited
    del t
    assert torch.musa.memory_allocated() == base + (4 << 20)  # still the collective's
    deadline = time.monotonic() + 30
    while torch.musa.memory_allocated() > base and time.monotonic() < deadline:
        dist.all_reduce(small)  # each collective lets go of what completed
        time.sleep(0.01)
    assert torch.musa.memory_allocated() == base
