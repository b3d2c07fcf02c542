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


@pytest.mark.parametrize("env, library, expected", [
    ({}, "gloo", True), ({}, "nccl", False),  # torch's convention: off for NCCL, on for Gloo
    ({"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, "nccl", True),
    ({"TORCH_DISTRIBUTED_DEBUG": "INFO"}, "nccl", False),
    ({"TORCH_MCCL_CHECK_COLLECTIVES": "1"}, "nccl", True),
    ({"TORCH_MCCL_CHECK_COLLECTIVES": "0"}, "gloo", False),
    ({"TORCH_MCCL_CHECK_COLLECTIVES": "0", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, "gloo", False),
])
def test_cross_rank_check_defaults_and_overrides(monkeypatch, env, library, expected):
    for k in ("TORCH_MCCL_CHECK_COLLECTIVES", "TORCH_DISTRIBUTED_DEBUG"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert torch.musa.distributed.check_collectives_enabled(library) is expected


def test_monitored_barrier_runs_on_mccl_and_leaves_gloo_groups_to_torch(group_of_one):
    group_of_one(backend="cpu:gloo,musa:mccl")
    wrapped = dist.monitored_barrier
    assert wrapped.__torch_musa_wrapped__ is not None
    dist.monitored_barrier(timeout=__import__("datetime").timedelta(seconds=5))  # mccl's (torch refuses)
    with pytest.raises(ValueError, match="GLOO"):  # torch's own answer for this group
        wrapped.__torch_musa_wrapped__()
    gloo = dist.new_group(backend="gloo")  # a pure Gloo group goes to torch's function, as before
    dist.monitored_barrier(group=gloo)


def test_cuda_synchronize_takes_musa_devices_only():
    torch.cuda.synchronize(torch.device("musa", 0))  # PowerSGD's call with a musa bucket's device
    torch.cuda.synchronize("musa:0")
    original = torch.cuda.synchronize.__torch_musa_wrapped__
    for arg in (torch.device("cpu"), None):  # every other call is torch's own, error included
        errors = []
        for fn in (torch.cuda.synchronize, original):
            try:
                fn(arg)
                errors.append(None)
            except Exception as e:  # noqa: BLE001 - compared between the two
                errors.append((type(e), str(e)))
        assert errors[0] == errors[1]


def test_ddp_takes_bf16_compress_hook_on_musa_and_leaves_other_devices_to_torch(group_of_one):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    group_of_one(backend="cpu:gloo,musa:mccl")
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 2)
    x = torch.randn(3, 4)
    musa_ddp = DDP(torch.nn.Linear(4, 2).musa())
    musa_ddp.module.load_state_dict(ref.state_dict())
    musa_ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
    musa_ddp(x.musa()).sum().backward()
    ref(x).sum().backward()  # world of one: the gradient, rounded through bfloat16 and back
    torch.testing.assert_close(musa_ddp.module.weight.grad.cpu(), ref.weight.grad.bfloat16().float())
    cpu_ddp = DDP(torch.nn.Linear(4, 2))  # torch's own check, whatever it answers for this torch
    check = DDP._check_comm_hook.__torch_musa_wrapped__
    errors = []
    for fn in (cpu_ddp.register_comm_hook, lambda state, hook: check(cpu_ddp, hook)):
        try:
            fn(None, default_hooks.bf16_compress_hook)
            errors.append(None)
        except Exception as e:  # noqa: BLE001 - compared between the two
            errors.append((type(e), str(e)))
    assert errors[0] == errors[1]
    if torch.version.cuda is None:  # a CPU-only torch refuses it for CPU modules, as before
        assert errors[0] is not None and "BF16" in errors[0][1]
