"""Run-time wrappers around torch Python functions that hard-code a device list or call
CUDA-only ``torch._C`` functions without a dispatch point.

Every wrapper here changes behaviour for musa arguments only: any other call goes to torch's
own function, untouched. Each names in its docstring the torch function and the torch versions it
adapts; version differences are decided in ``_version_gate``. Sections are owned by topic; keep
each section's edits inside its markers.
"""

# ============================================================================================
# BEGIN SECTION: DataParallel (torch.nn.parallel.comm, torch._utils, DataParallel.__init__)
# ============================================================================================
import contextvars as _contextvars
import functools as _functools

import torch as _torch

_dp_originals = {}  # (module name, attribute) -> torch's own function
_dp_device_type = _contextvars.ContextVar("torch_musa_data_parallel_device_type", default=None)


def _dp_is_musa_tensor(t) -> bool:
    return isinstance(t, _torch.Tensor) and t.device.type == "musa"


def _dp_is_musa_device(d) -> bool:
    if isinstance(d, str):
        d = _torch.device(d)
    return isinstance(d, _torch.device) and d.type == "musa"


def _dp_is_musa_stream(s) -> bool:
    return isinstance(s, _torch.Stream) and s.device.type == "musa"


def _dp_ints_name_musa() -> bool:
    """Whether bare device indices name musa devices: torch's own rule for DataParallel
    (``_get_available_device_type``), so on a machine with CUDA they keep naming CUDA devices."""
    return _torch._utils._get_available_device_type() == "musa"


def _dp_targets_musa(devices, streams=None) -> bool:
    """For a CPU source tensor: do the target devices (indices, devices) and streams name musa?"""
    devices = list(devices or ())
    if any(_dp_is_musa_device(d) for d in devices) or any(_dp_is_musa_stream(s) for s in (streams or ())):
        return True
    if any(isinstance(d, (str, _torch.device)) for d in devices):
        return False  # explicit devices of another type
    return bool(devices) and _dp_ints_name_musa()


def _dp_index(d) -> int:
    from torch._utils import _get_device_index

    return _get_device_index(d, optional=False, allow_cpu=False)


def _dp_musa_stream_or_none(streams, i, device_index):
    """The i-th copy stream, if given and a musa stream (torch asks torch.accelerator for them)."""
    if streams is None or i >= len(streams) or streams[i] is None or not _dp_is_musa_stream(streams[i]):
        return None
    s = streams[i]
    if s.device_index != device_index:
        raise RuntimeError(
            f"Expected the device associated with the stream at index {i} (was {s.device_index}) to match "
            f"the device supplied at that index (expected {device_index})")
    return s


def _dp_broadcast_to(tensor, devices):
    """Copies of ``tensor`` on musa ``devices`` (the tensor itself where it already lives), like
    torch::cuda::broadcast: each copy a fresh contiguous tensor written on the current stream."""
    src = tensor.get_device() if _dp_is_musa_tensor(tensor) else -1
    if src >= 0 and devices and devices[0] != src:
        raise RuntimeError("device of broadcasted tensor must appear as the first on devices list")
    results = []
    for d in devices:
        if d == src:
            results.append(tensor)
            continue
        with _torch.musa.device(d):
            out = _torch.empty(tensor.shape, dtype=tensor.dtype, device=_torch.device("musa", d))
            out.copy_(tensor, non_blocking=True)
        results.append(out)
    return results


def _dp_check_out(out, like, what, dim=None):
    for i, o in enumerate(out):
        if not _dp_is_musa_tensor(o):
            raise RuntimeError(f"Expected all output tensors to be musa tensors, but output tensor at index {i} "
                               f"has device '{o.device}'")
        if dim is None and o.shape != like.shape:
            raise RuntimeError(f"Expected all output tensors to have same shape as the source {what} "
                               f"{tuple(like.shape)}, but output tensor at index {i} has shape {tuple(o.shape)}")


def _dp_broadcast(tensor, devices=None, *, out=None):
    """musa side of ``torch.nn.parallel.comm.broadcast`` (torch 2.11-2.15)."""
    from torch._utils import _handle_complex

    tensor = _handle_complex(tensor)
    if not ((devices is None) ^ (out is None)):
        raise RuntimeError(
            f"Exactly one of 'devices' and 'out' must be specified, but got devices={devices} and out={out}")
    if devices is not None:
        return tuple(_dp_broadcast_to(tensor, [_dp_index(d) for d in devices]))
    _dp_check_out(out, tensor, "tensor")
    for o in out:
        with _torch.musa.device(o.get_device()):
            o.copy_(tensor, non_blocking=True)
    return tuple(out)


def _dp_broadcast_coalesced(tensors, devices, buffer_size=10485760):
    """musa side of ``torch.nn.parallel.comm.broadcast_coalesced`` (torch 2.11-2.15), as
    torch::cuda::broadcast_coalesced: the first device's list holds the tensors themselves, the
    others get the copies of buffers of at most ``buffer_size`` bytes, unflattened into tensors
    with their own version counters."""
    from torch._utils import (
        _flatten_dense_tensors, _handle_complex, _reorder_tensors_as, _take_tensors, _unflatten_dense_tensors)

    devices = [_dp_index(d) for d in devices]
    tensors = [_handle_complex(t) for t in tensors]
    if not devices:
        raise RuntimeError("Expected at least one device to broadcast to")
    for t in tensors:
        if t.get_device() != devices[0]:
            raise RuntimeError("All tensors must be on devices[0]: " + str(devices[0]))
        if t.layout != _torch.strided:
            raise RuntimeError(f"broadcast_coalesced on musa supports dense tensors only, got {t.layout}")
    outputs = [list(tensors)] + [[] for _ in devices[1:]]
    if len(devices) == 1:
        return outputs
    chunks = list(_take_tensors(tensors, buffer_size))
    for chunk in chunks:
        flat = _flatten_dense_tensors(chunk)
        copies = _dp_broadcast_to(flat, devices)
        for i in range(1, len(devices)):
            outputs[i].extend(t.data for t in _unflatten_dense_tensors(copies[i], chunk))
    if len(chunks) > 1:
        for i in range(1, len(devices)):
            outputs[i] = list(_reorder_tensors_as(outputs[i], tensors))
    return outputs


def _dp_reduce_add(inputs, destination=None):
    """musa side of ``torch.nn.parallel.comm.reduce_add`` (torch 2.11-2.15): the sum on the
    destination musa device (default: the current one), the other inputs copied there on its
    current stream (torch's NCCL branch is CUDA-only)."""
    destination = _torch.musa.current_device() if destination is None else _dp_index(destination)
    input_size = inputs[0].size()
    root_index = None
    for i, inp in enumerate(inputs):
        if not _dp_is_musa_tensor(inp):
            raise AssertionError(f"reduce_add expects all inputs to be on musa devices, but input {i} is on "
                                 f"{inp.device}")
        if inp.get_device() == destination:
            root_index = i
        if inp.size() != input_size:
            got = "x".join(str(x) for x in inp.size())
            expected = "x".join(str(x) for x in input_size)
            raise ValueError(f"input {i} has invalid size: got {got}, but expected {expected}")
    if root_index is None:
        raise RuntimeError("reduce_add expects destination to be on the same device with one of the tensors")
    if len(inputs) == 1:
        return inputs[0]
    dst = _torch.device("musa", destination)
    nonroot = [t for i, t in enumerate(inputs) if i != root_index]
    with _torch.musa.device(destination):
        result = inputs[root_index] + nonroot[0].to(device=dst, non_blocking=True)
        for other in nonroot[1:]:
            result.add_(other.to(device=dst, non_blocking=True))
    return result


def _dp_scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    """musa side of ``torch.nn.parallel.comm.scatter`` (torch 2.11-2.15), as torch::cuda::scatter:
    chunks already on their device stay views; the others are copied, each on its musa stream in
    ``streams`` when one is given (DataParallel's background copy streams), else on the current one."""
    from torch._utils import _handle_complex

    tensor = _handle_complex(tensor)
    dim = dim + tensor.dim() if dim < 0 else dim
    src = tensor.get_device() if _dp_is_musa_tensor(tensor) else -1
    if out is None:
        devices = [_dp_index(d) for d in devices]
        if not devices:
            raise RuntimeError("Expected at least one device to scatter to")
        if chunk_sizes is not None:
            chunk_sizes = list(chunk_sizes)
            if len(chunk_sizes) != len(devices):
                raise RuntimeError(f"Expected devices and chunk_sizes to be of same length, but got "
                                   f"len(devices) = {len(devices)} and len(chunk_sizes) = {len(chunk_sizes)}")
            if sum(chunk_sizes) != tensor.size(dim):
                raise RuntimeError(f"Chunk sizes sum to {sum(chunk_sizes)}, but expected {tensor.size(dim)}")
            chunks = list(tensor.split(chunk_sizes, dim))
        else:
            chunks = list(tensor.chunk(len(devices), dim))
        for i, chunk in enumerate(chunks):
            d = devices[i]
            if d == src:
                continue
            stream = _dp_musa_stream_or_none(streams, i, d)
            with _torch.musa.device(d), _torch.musa.stream(stream):
                chunks[i] = chunk.to(_torch.device("musa", d), non_blocking=True)
        return tuple(chunks)
    if devices is not None:
        raise RuntimeError(f"'devices' must not be specified when 'out' is specified, but got devices={devices}")
    if chunk_sizes is not None:
        raise RuntimeError(
            f"'chunk_sizes' must not be specified when 'out' is specified, but got chunk_sizes={chunk_sizes}")
    _dp_check_out(out, tensor, "tensor", dim=dim)
    sizes = [o.size(dim) for o in out]
    if sum(sizes) != tensor.size(dim):
        raise RuntimeError(f"Total size for output tensors along scatter dim ({sum(sizes)}) does not match "
                           f"the size of the source tensor along that dim ({tensor.size(dim)})")
    for i, (o, chunk) in enumerate(zip(out, tensor.split(sizes, dim))):
        stream = _dp_musa_stream_or_none(streams, i, o.get_device())
        with _torch.musa.device(o.get_device()), _torch.musa.stream(stream):
            o.copy_(chunk, non_blocking=True)
    return tuple(out)


def _dp_gather_into(tensors, out, dim):
    for i, (piece, t) in enumerate(zip(out.split([t.size(dim) for t in tensors], dim), tensors)):
        if out.device.type == "musa":
            with _torch.musa.device(out.get_device()):
                piece.copy_(t, non_blocking=True)
        else:
            piece.copy_(t)
    return out


def _dp_gather_check(tensors, dim):
    first = tensors[0]
    expected = list(first.shape)
    total = 0
    for i, t in enumerate(tensors):
        if not _dp_is_musa_tensor(t):
            raise RuntimeError(f"Expected all input tensors to be musa tensors, but tensor at index {i} was on "
                               f"device {t.device}")
        if t.dim() != len(expected):
            raise RuntimeError(f"Expected all input tensors to have the same number of dimensions "
                               f"({len(expected)}), but tensor at index {i} has {t.dim()} dimensions")
        expected[dim] = t.size(dim)
        if list(t.shape) != expected:
            raise RuntimeError(f"Input tensor at index {i} has invalid shape {list(t.shape)}, "
                               f"but expected {expected}")
        total += t.size(dim)
    expected[dim] = total
    return expected


def _dp_memory_format(t):
    """ATen's suggest_memory_format (which Python does not expose): channels-last strides, else contiguous."""
    last = {4: _torch.channels_last, 5: _torch.channels_last_3d}.get(t.dim())
    if last is not None and not t.is_contiguous() and t.is_contiguous(memory_format=last):
        return last
    return _torch.contiguous_format


def _dp_gather(tensors, dim=0, destination=None, *, out=None):
    """musa side of ``torch.nn.parallel.comm.gather`` (torch 2.11-2.15), as torch::cuda::gather:
    the concatenation written into a tensor on ``destination`` (a musa device, default the current
    one, or the CPU), each piece copied on the destination's current stream."""
    import warnings

    from torch._utils import _get_device_index, _handle_complex

    tensors = [_handle_complex(t) for t in tensors]
    if not tensors:
        raise RuntimeError("Expected at least one tensor to gather from")
    dim = dim + tensors[0].dim() if dim < 0 else dim
    shape = _dp_gather_check(tensors, dim)
    if out is not None:
        if destination is not None:
            raise RuntimeError(
                f"'destination' must not be specified when 'out' is specified, but got destination={destination}")
        if list(out.shape) != shape:
            raise RuntimeError(f"Expected out tensor to have shape {shape}, but got {list(out.shape)}")
        return _dp_gather_into(tensors, out, dim)
    if destination == -1:
        warnings.warn('Using -1 to represent CPU tensor is deprecated. Please use a device object or string '
                      'instead, e.g., "cpu".', FutureWarning, stacklevel=3)
    index = _torch.musa.current_device() if destination is None else _get_device_index(destination, allow_cpu=True)
    device = _torch.device("cpu") if index == -1 else _torch.device("musa", index)
    formats = {_dp_memory_format(t) for t in tensors}
    fmt = formats.pop() if len(formats) == 1 else _torch.contiguous_format
    result = _torch.empty(shape, dtype=tensors[0].dtype, device=device, memory_format=fmt)
    return _dp_gather_into(tensors, result, dim)


def _dp_wrap_broadcast(torch_fn):
    @_functools.wraps(torch_fn)
    def broadcast(tensor, devices=None, *, out=None):
        """Adapts torch.nn.parallel.comm.broadcast (torch 2.11-2.15; torch.cuda.comm re-exports it):
        torch calls torch._C._broadcast / _broadcast_out, CUDA-only (absent from CPU builds). A musa
        tensor, musa ``out`` tensors, or a CPU tensor sent to musa devices go to ``_dp_broadcast``."""
        if (_dp_is_musa_tensor(tensor) or any(_dp_is_musa_tensor(o) for o in (out or ()))
                or (out is None and isinstance(tensor, _torch.Tensor) and tensor.device.type == "cpu"
                    and _dp_targets_musa(devices))):
            return _dp_broadcast(tensor, devices, out=out)
        return torch_fn(tensor, devices, out=out)

    return broadcast


def _dp_wrap_broadcast_coalesced(torch_fn):
    @_functools.wraps(torch_fn)
    def broadcast_coalesced(tensors, devices, buffer_size=10485760):
        """Adapts torch.nn.parallel.comm.broadcast_coalesced (torch 2.11-2.15): torch calls
        torch._C._broadcast_coalesced, CUDA-only. Musa tensors go to ``_dp_broadcast_coalesced``
        (DataParallel's replicate and Broadcast use it)."""
        tensors = list(tensors)
        if any(_dp_is_musa_tensor(t) for t in tensors):
            return _dp_broadcast_coalesced(tensors, devices, buffer_size)
        return torch_fn(tensors, devices, buffer_size)

    return broadcast_coalesced


def _dp_wrap_reduce_add(torch_fn):
    @_functools.wraps(torch_fn)
    def reduce_add(inputs, destination=None):
        """Adapts torch.nn.parallel.comm.reduce_add (torch 2.11-2.15): torch's default destination
        is the current device of the first available device type (CUDA where present) and it asks
        torch.cuda.nccl first (a warning on CPU builds). Musa inputs go to ``_dp_reduce_add``;
        reduce_add_coalesced reaches this through the module global."""
        if any(_dp_is_musa_tensor(t) for t in inputs):
            return _dp_reduce_add(inputs, destination)
        return torch_fn(inputs, destination)

    return reduce_add


def _dp_wrap_scatter(torch_fn):
    @_functools.wraps(torch_fn)
    def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
        """Adapts torch.nn.parallel.comm.scatter (torch 2.11-2.15): torch calls torch._C._scatter /
        _scatter_out, CUDA-only. A musa tensor, musa ``out`` tensors, or a CPU tensor sent to musa
        devices or on musa streams go to ``_dp_scatter``."""
        if (_dp_is_musa_tensor(tensor) or any(_dp_is_musa_tensor(o) for o in (out or ()))
                or (out is None and isinstance(tensor, _torch.Tensor) and tensor.device.type == "cpu"
                    and _dp_targets_musa(devices, streams))):
            return _dp_scatter(tensor, devices, chunk_sizes, dim, streams, out=out)
        return torch_fn(tensor, devices, chunk_sizes, dim, streams, out=out)

    return scatter


def _dp_wrap_gather(torch_fn):
    @_functools.wraps(torch_fn)
    def gather(tensors, dim=0, destination=None, *, out=None):
        """Adapts torch.nn.parallel.comm.gather (torch 2.11-2.15): torch calls torch._C._gather /
        _gather_out, CUDA-only. Musa input tensors go to ``_dp_gather``."""
        tensors = list(tensors)
        if any(_dp_is_musa_tensor(t) for t in tensors):
            return _dp_gather(tensors, dim, destination, out=out)
        return torch_fn(tensors, dim, destination, out=out)

    return gather


def _dp_wrap_get_available_device_type(torch_fn):
    @_functools.wraps(torch_fn)
    def _get_available_device_type():
        """Adapts torch._utils._get_available_device_type (torch 2.11-2.15), which answers "cuda"
        before the PrivateUse1 backend whenever CUDA is available: while a DataParallel is built
        around a musa module (see ``_dp_wrap_data_parallel_init``) it answers "musa", so the module's
        device, ``device_ids=None`` (all devices) and the current device are musa's. Otherwise it is
        torch's answer."""
        if _dp_device_type.get() == "musa":
            return "musa"
        return torch_fn()

    return _get_available_device_type


def _dp_module_is_musa(module, device_ids, output_device) -> bool:
    if any(_dp_is_musa_device(d) for d in list(device_ids or ()) + [output_device]):
        return True
    if isinstance(module, _torch.nn.Module):
        for t in module.parameters():
            return t.device.type == "musa"
        for t in module.buffers():
            return t.device.type == "musa"
    return False


def _dp_wrap_data_parallel_init(torch_fn):
    @_functools.wraps(torch_fn)
    def __init__(self, module, device_ids=None, output_device=None, dim=0, *args, **kwargs):
        """Adapts torch.nn.DataParallel.__init__ (torch 2.11-2.15): it takes the device type from
        torch._utils._get_available_device_type(), "cuda" whenever CUDA is available, and would
        move a musa module to a CUDA device. A module on musa (or musa device_ids / output_device)
        makes that answer "musa" for the call; other modules see torch's own."""
        if not _dp_module_is_musa(module, device_ids, output_device):
            return torch_fn(self, module, device_ids, output_device, dim, *args, **kwargs)
        token = _dp_device_type.set("musa")
        try:
            return torch_fn(self, module, device_ids, output_device, dim, *args, **kwargs)
        finally:
            _dp_device_type.reset(token)

    return __init__


def _dp_wrap_data_parallel_fn(torch_fn):
    @_functools.wraps(torch_fn)
    def data_parallel(module, inputs, device_ids=None, output_device=None, *args, **kwargs):
        """Adapts torch.nn.parallel.data_parallel (torch 2.11-2.15) as ``_dp_wrap_data_parallel_init``
        does DataParallel.__init__: a musa module makes the available device type musa for the call."""
        if not _dp_module_is_musa(module, device_ids, output_device):
            return torch_fn(module, inputs, device_ids, output_device, *args, **kwargs)
        token = _dp_device_type.set("musa")
        try:
            return torch_fn(module, inputs, device_ids, output_device, *args, **kwargs)
        finally:
            _dp_device_type.reset(token)

    return data_parallel


_DP_COMM_WRAPPERS = {
    "broadcast": _dp_wrap_broadcast,
    "broadcast_coalesced": _dp_wrap_broadcast_coalesced,
    "reduce_add": _dp_wrap_reduce_add,
    "scatter": _dp_wrap_scatter,
    "gather": _dp_wrap_gather,
}


def _dp_patch(owner, owner_name, attr, make):
    key = (owner_name, attr)
    if key in _dp_originals:
        return
    original = getattr(owner, attr)
    _dp_originals[key] = original
    setattr(owner, attr, make(original))


def install_data_parallel() -> None:
    """Installs the DataParallel wrappers (idempotent). torch.nn.parallel is loaded by ``import torch``;
    torch.cuda.comm, loaded lazily, re-exports the comm functions and so picks up the wrappers, or is
    re-pointed here when it loaded first."""
    import sys

    import torch._utils
    import torch.nn.parallel.comm as comm
    import torch.nn.parallel.data_parallel  # noqa: F401  (the package's attribute of that name is the function)

    data_parallel_module = sys.modules["torch.nn.parallel.data_parallel"]

    for name, make in _DP_COMM_WRAPPERS.items():
        _dp_patch(comm, "torch.nn.parallel.comm", name, make)
    cuda_comm = sys.modules.get("torch.cuda.comm")
    if cuda_comm is not None:
        for name in _DP_COMM_WRAPPERS:
            if getattr(cuda_comm, name, None) is _dp_originals[("torch.nn.parallel.comm", name)]:
                setattr(cuda_comm, name, getattr(comm, name))
    _dp_patch(torch._utils, "torch._utils", "_get_available_device_type", _dp_wrap_get_available_device_type)
    if getattr(data_parallel_module, "_get_available_device_type", None) is \
            _dp_originals[("torch._utils", "_get_available_device_type")]:
        data_parallel_module._get_available_device_type = torch._utils._get_available_device_type
    _dp_patch(data_parallel_module.DataParallel, "DataParallel", "__init__", _dp_wrap_data_parallel_init)
    _dp_patch(data_parallel_module, "torch.nn.parallel.data_parallel", "data_parallel", _dp_wrap_data_parallel_fn)
    parallel = sys.modules["torch.nn.parallel"]
    if getattr(parallel, "data_parallel", None) is _dp_originals[("torch.nn.parallel.data_parallel", "data_parallel")]:
        parallel.data_parallel = data_parallel_module.data_parallel


# ============================================================================================
# END SECTION: DataParallel
# ============================================================================================


def install() -> None:
    """Installs every section's wrappers; torch_musa calls this at import (each installer is
    idempotent and cheap: it wraps modules ``import torch`` has loaded, or hooks their import)."""
    install_data_parallel()
