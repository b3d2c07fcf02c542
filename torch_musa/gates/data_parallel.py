"""DataParallel: torch.nn.parallel.comm, torch._utils._get_available_device_type and DataParallel's
entry points (torch 2.11-2.15). torch's comm functions call CUDA-only torch._C functions, and
DataParallel takes its device type from a list that answers "cuda" first; musa calls go to
torch.musa.comm and see "musa" as the device type."""
import contextvars
import functools

import torch

from . import _args
from .registry import gate

_COMM = "torch.nn.parallel.comm"
_DP = "torch.nn.parallel.data_parallel"
_device_type = contextvars.ContextVar("torch_musa_data_parallel_device_type", default=None)


def _musa_comm():
    from .. import comm

    return comm


def _ints_name_musa() -> bool:
    """Bare device indices name musa devices by torch's own rule for DataParallel, so on a machine
    with CUDA they keep naming CUDA devices."""
    return torch._utils._get_available_device_type() == "musa"


def _targets_musa(devices, streams=None) -> bool:
    """For a CPU source tensor: do the target devices (indices, devices) and streams name musa?"""
    devices = list(devices or ())
    if any(_args.is_musa_device(d) for d in devices) or any(_args.is_musa_stream(s) for s in (streams or ())):
        return True
    if any(isinstance(d, (str, torch.device)) for d in devices):
        return False  # explicit devices of another type
    return bool(devices) and _ints_name_musa()


def _sends_to_musa(tensor, out, devices, streams=None) -> bool:
    """A musa tensor, musa ``out`` tensors, or a CPU tensor sent to musa devices or streams."""
    return (_args.is_musa_tensor(tensor) or any(_args.is_musa_tensor(o) for o in (out or ()))
            or (out is None and isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu"
                and _targets_musa(devices, streams)))


@gate(_COMM, "broadcast", "calls CUDA-only torch._C._broadcast / _broadcast_out; musa tensors or musa "
      "targets go to torch.musa.comm.broadcast", aliases=[("torch.cuda.comm", "broadcast")])
def _wrap_broadcast(torch_fn):
    @functools.wraps(torch_fn)
    def broadcast(tensor, devices=None, *, out=None):
        if _sends_to_musa(tensor, out, devices):
            return _musa_comm().broadcast(tensor, devices, out=out)
        return torch_fn(tensor, devices, out=out)

    return broadcast


@gate(_COMM, "broadcast_coalesced", "calls CUDA-only torch._C._broadcast_coalesced (DataParallel's replicate); "
      "musa tensors go to torch.musa.comm", aliases=[("torch.cuda.comm", "broadcast_coalesced")])
def _wrap_broadcast_coalesced(torch_fn):
    @functools.wraps(torch_fn)
    def broadcast_coalesced(tensors, devices, buffer_size=10485760):
        tensors = list(tensors)
        if any(_args.is_musa_tensor(t) for t in tensors):
            return _musa_comm().broadcast_coalesced(tensors, devices, buffer_size)
        return torch_fn(tensors, devices, buffer_size)

    return broadcast_coalesced


@gate(_COMM, "reduce_add", "defaults the destination to CUDA's current device and asks NCCL first; musa inputs "
      "go to torch.musa.comm (reduce_add_coalesced reaches it too)", aliases=[("torch.cuda.comm", "reduce_add")])
def _wrap_reduce_add(torch_fn):
    @functools.wraps(torch_fn)
    def reduce_add(inputs, destination=None):
        if any(_args.is_musa_tensor(t) for t in inputs):
            return _musa_comm().reduce_add(inputs, destination)
        return torch_fn(inputs, destination)

    return reduce_add


@gate(_COMM, "scatter", "calls CUDA-only torch._C._scatter / _scatter_out; musa tensors, devices or streams "
      "go to torch.musa.comm.scatter", aliases=[("torch.cuda.comm", "scatter")])
def _wrap_scatter(torch_fn):
    @functools.wraps(torch_fn)
    def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
        if _sends_to_musa(tensor, out, devices, streams):
            return _musa_comm().scatter(tensor, devices, chunk_sizes, dim, streams, out=out)
        return torch_fn(tensor, devices, chunk_sizes, dim, streams, out=out)

    return scatter


@gate(_COMM, "gather", "calls CUDA-only torch._C._gather / _gather_out; musa inputs go to torch.musa.comm.gather",
      aliases=[("torch.cuda.comm", "gather")])
def _wrap_gather(torch_fn):
    @functools.wraps(torch_fn)
    def gather(tensors, dim=0, destination=None, *, out=None):
        tensors = list(tensors)
        if any(_args.is_musa_tensor(t) for t in tensors):
            return _musa_comm().gather(tensors, dim, destination, out=out)
        return torch_fn(tensors, dim, destination, out=out)

    return gather


@gate("torch._utils", "_get_available_device_type", "answers \"cuda\" before PrivateUse1 whenever CUDA is "
      "present; answers \"musa\" only while a DataParallel is built around a musa module",
      aliases=[(_DP, "_get_available_device_type")])
def _wrap_get_available_device_type(torch_fn):
    @functools.wraps(torch_fn)
    def _get_available_device_type():
        if _device_type.get() == "musa":
            return "musa"
        return torch_fn()

    return _get_available_device_type


def _module_is_musa(module, device_ids, output_device) -> bool:
    if any(_args.is_musa_device(d) for d in list(device_ids or ()) + [output_device]):
        return True
    if isinstance(module, torch.nn.Module):
        for t in module.parameters():
            return t.device.type == "musa"
        for t in module.buffers():
            return t.device.type == "musa"
    return False


def _as_musa_when_module_is(call, module, device_ids, output_device):
    """Runs ``call()`` with the available device type musa's when the module (or its devices) is."""
    if not _module_is_musa(module, device_ids, output_device):
        return call()
    token = _device_type.set("musa")
    try:
        return call()
    finally:
        _device_type.reset(token)


@gate(_DP, "DataParallel.__init__", "takes the device type from _get_available_device_type (\"cuda\" first); "
      "a module, device_ids or output_device on musa make it musa's for the call")
def _wrap_data_parallel_init(torch_fn):
    @functools.wraps(torch_fn)
    def __init__(self, module, device_ids=None, output_device=None, dim=0, *args, **kwargs):
        return _as_musa_when_module_is(
            lambda: torch_fn(self, module, device_ids, output_device, dim, *args, **kwargs),
            module, device_ids, output_device)

    return __init__


@gate(_DP, "data_parallel", "as DataParallel.__init__: a musa module makes the available device type musa's "
      "for the call", aliases=[("torch.nn.parallel", "data_parallel")])
def _wrap_data_parallel_fn(torch_fn):
    @functools.wraps(torch_fn)
    def data_parallel(module, inputs, device_ids=None, output_device=None, *args, **kwargs):
        return _as_musa_when_module_is(
            lambda: torch_fn(module, inputs, device_ids, output_device, *args, **kwargs),
            module, device_ids, output_device)

    return data_parallel
