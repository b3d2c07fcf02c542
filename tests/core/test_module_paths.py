"""torch_musa's module paths (torch_musa.core.*, musa_graph, multi_tensor_apply, profiler,
torch.version.musa) lead to this package's own objects: the same modules and functions, no copies."""
import importlib

import pytest
import torch

import torch_musa


@pytest.mark.parametrize("path, same_as", [
    ("torch_musa.core.memory", "torch_musa.memory"),
    ("torch_musa.core.random", "torch_musa.random"),
    ("torch_musa.core.stream", "torch_musa.streams"),
    ("torch_musa.core.mudnn", "torch_musa.backends.mudnn"),
    ("torch_musa.musa_graph", "torch_musa.graphs"),
    ("torch_musa.musa_graph.graphs", "torch_musa.graphs"),
    ("torch_musa._graph_lifecycle", "torch_musa.graphs.lifecycle"),
    ("torch_musa._dynamo_musagraphs", "torch_musa.graphs.dynamo_backend"),
])
def test_module_paths_are_the_same_modules(path, same_as):
    assert importlib.import_module(path) is importlib.import_module(same_as)


def test_core_names_are_torch_musas_own_objects():
    from torch_musa.core import _lazy_init, _utils, amp, device, reductions, serialization  # noqa: F401
    from torch_musa.core.amp.autocast_mode import autocast, custom_bwd, custom_fwd
    from torch_musa.core.amp.grad_scaler import GradScaler, OptState
    from torch_musa.core.memory import memory_allocated
    from torch_musa.core.stream import Event, Stream

    assert autocast is torch.musa.amp.autocast and custom_fwd is torch.musa.amp.custom_fwd
    assert custom_bwd is torch.musa.amp.custom_bwd and GradScaler is torch.musa.amp.GradScaler
    assert OptState is torch.amp.grad_scaler.OptState and amp.GradScaler is GradScaler
    assert memory_allocated is torch.musa.memory_allocated
    assert Stream is torch.musa.Stream and Event is torch.musa.Event
    assert device.Device is torch.musa.device and device.DeviceOf is torch.musa.device_of
    assert device.set_device is torch.musa.set_device and device.is_bf16_supported is torch.musa.is_bf16_supported
    assert _lazy_init._lazy_init is torch.musa._lazy_init and torch_musa.core._lazy_init_musa is torch.musa._lazy_init
    assert torch_musa.fork_rng is torch_musa.core.random.fork_rng
    assert torch_musa.musa_graph.MUSAGraph is torch.musa.MUSAGraph
    assert torch_musa.musa_graph.make_graphed_callables is torch.musa.make_graphed_callables


def test_grad_scaler_from_the_core_path_scales_on_musa(device):
    from torch_musa.core.amp import GradScaler

    scaler = GradScaler(init_scale=4.0)
    w = torch.nn.Parameter(torch.ones(3, device=device))
    opt = torch.optim.SGD([w], lr=0.5)
    scaler.scale((w * 2).sum()).backward()
    assert torch.equal(w.grad.cpu(), torch.full((3,), 8.0))  # scaled by 4
    scaler.step(opt)  # unscaled before the step: 1 - 0.5 * 2
    scaler.update()
    assert torch.equal(w.detach().cpu(), torch.zeros(3))


def test_get_musa_device_index_as_torch_cudas_get_device_index():
    from torch_musa.core._utils import _get_musa_device_index as idx

    torch.musa.set_device(0)
    assert idx(None) == 0 and idx(0) == 0 and idx(1) == 1
    assert idx("musa") == 0 and idx("musa:1") == 1 and idx(torch.device("musa", 1)) == 1
    assert idx(torch.musa.device(1)) == 1
    assert idx("cpu", allow_cpu=True) == -1  # torch._utils._get_device_index's answer for cpu
    with pytest.raises(ValueError, match="Expected a musa device, but got: cpu"):
        idx("cpu")
    with pytest.raises(ValueError, match="Expected a musa or cpu device, but got: meta"):
        idx(torch.device("meta"), allow_cpu=True)
    if torch.musa.device_count() > 1:
        with torch.musa.device(1):
            assert idx(None) == 1 and idx("musa") == 1


def test_torch_version_musa_is_the_runtime_api_level():
    assert torch.version.musa == str(torch.musa._C._runtime_version())
    assert torch.version.musa.isdigit()


def test_event_reductions_register_with_forking_pickler():
    from multiprocessing.reduction import ForkingPickler

    from torch_musa.core import reductions

    reductions.init_reductions()
    assert ForkingPickler._extra_reducers[torch.musa.Event] is reductions.reduce_event
