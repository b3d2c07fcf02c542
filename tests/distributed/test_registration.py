"""mccl's registration, as torch.distributed resolves it for nccl: in-process groups of one rank
(these run on the host driver in CI and on the GPU with the cuda driver)."""
import pytest
import torch
import torch.distributed as dist

from tests.distributed.launcher import free_port


@pytest.fixture
def group_of_one():
    made = []

    def init(**kw):
        dist.init_process_group(init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, **kw)
        made.append(True)

    yield init
    if dist.is_initialized():
        dist.destroy_process_group()


def test_names_like_nccl():
    assert dist.is_mccl_available()
    assert dist.ProcessGroupMCCL is torch.musa.distributed.ProcessGroupMCCL
    assert dist.Backend.MCCL == "mccl"
    assert dist.Backend.default_device_backend_map["musa"] == "mccl"
    v = torch.musa.mccl.version()
    assert isinstance(v, tuple) and len(v) == 3 and all(isinstance(x, int) for x in v)
    expected = "nccl" if torch.musa.get_driver_name() == "cuda" else "gloo"
    assert torch.musa.mccl.library() == expected


@pytest.mark.parametrize("how", [dict(backend="mccl"), dict(backend="cpu:gloo,musa:mccl"), dict(),
                                 dict(device_id=torch.device("musa", 0))])
def test_every_way_of_asking_resolves_to_mccl(group_of_one, how):
    group_of_one(**how)
    backend = dist.group.WORLD._get_backend(torch.device("musa", 0))
    assert isinstance(backend, dist.ProcessGroupMCCL)
    t = torch.arange(4.0, device="musa")
    dist.all_reduce(t)
    torch.testing.assert_close(t.cpu(), torch.arange(4.0))
    if "device_id" in how:
        assert dist.group.WORLD.bound_device_id == torch.device("musa", 0)
    if "gloo" in how.get("backend", ""):  # cpu tensors go through gloo where the group has it
        c = torch.ones(3)
        dist.all_reduce(c)
        torch.testing.assert_close(c, torch.ones(3))


def test_cpu_tensor_on_an_mccl_only_group_names_the_device(group_of_one):
    group_of_one(backend="mccl")
    with pytest.raises(RuntimeError, match="cpu"):
        dist.all_reduce(torch.ones(2))
    t = torch.ones(2, device="musa")  # still usable
    dist.all_reduce(t)
    assert t.cpu().tolist() == [1.0, 1.0]


def test_mixed_devices_in_one_call_say_how_to_fix(group_of_one):
    group_of_one(backend="mccl")
    outs = [torch.empty(2)]  # a cpu output for a musa input
    with pytest.raises(RuntimeError, match=r"cpu:gloo,musa:mccl"):
        dist.all_gather(outs, torch.ones(2, device="musa"))


def test_in_place_without_copies(group_of_one):
    group_of_one(backend="mccl")
    torch.musa.distributed.reset_staged_counts()
    t = torch.arange(6.0, device="musa")
    ptr = t.data_ptr()
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    assert t.data_ptr() == ptr
    assert torch.musa.distributed.staged_counts() == {}
    assert w.result()[0].data_ptr() == ptr


def test_reducer_timer_is_registered_for_musa(group_of_one):
    group_of_one(backend="mccl")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2).musa())
    model._set_ddp_runtime_logging_sample_rate(1)
    for _ in range(2):
        model(torch.randn(3, 4, device="musa")).sum().backward()
    stats = model._get_ddp_logging_data()
    assert stats["avg_backward_compute_time"] > 0
