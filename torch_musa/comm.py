"""torch.musa.comm: torch.cuda.comm's functions for musa tensors (DataParallel's building blocks):
copies between musa devices on the given musa streams, sums on the destination. torch's
``torch.nn.parallel.comm`` reaches them for musa arguments (torch_musa/gates/data_parallel.py), since
torch's own call CUDA-only ``torch._C`` functions."""
import torch
from torch.nn.parallel.comm import reduce_add_coalesced  # noqa: F401  (pure Python over reduce_add)

from . import streams as _streams
from ._core import device as _device

__all__ = ["broadcast", "broadcast_coalesced", "reduce_add", "reduce_add_coalesced", "scatter", "gather"]


def _is_musa_tensor(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "musa"


def _is_musa_stream(s) -> bool:
    return isinstance(s, torch.Stream) and s.device.type == "musa"


def _index(d) -> int:
    from torch._utils import _get_device_index

    return _get_device_index(d, optional=False, allow_cpu=False)


def _musa_stream_or_none(streams, i, device_index):
    """The i-th copy stream, if given and a musa stream (torch asks torch.accelerator for them)."""
    if streams is None or i >= len(streams) or streams[i] is None or not _is_musa_stream(streams[i]):
        return None
    s = streams[i]
    if s.device_index != device_index:
        raise RuntimeError(
            f"Expected the device associated with the stream at index {i} (was {s.device_index}) to match "
            f"the device supplied at that index (expected {device_index})")
    return s


def _broadcast_to(tensor, devices):
    """Copies of ``tensor`` on musa ``devices`` (the tensor itself where it already lives), like
    torch::cuda::broadcast: each copy a fresh contiguous tensor written on the current stream."""
    src = tensor.get_device() if _is_musa_tensor(tensor) else -1
    if src >= 0 and devices and devices[0] != src:
        raise RuntimeError("device of broadcasted tensor must appear as the first on devices list")
    results = []
    for d in devices:
        if d == src:
            results.append(tensor)
            continue
        with _device.device(d):
            out = torch.empty(tensor.shape, dtype=tensor.dtype, device=torch.device("musa", d))
            out.copy_(tensor, non_blocking=True)
        results.append(out)
    return results


def _check_out(out, like, what, dim=None):
    for i, o in enumerate(out):
        if not _is_musa_tensor(o):
            raise RuntimeError(f"Expected all output tensors to be musa tensors, but output tensor at index {i} "
                               f"has device '{o.device}'")
        if dim is None and o.shape != like.shape:
            raise RuntimeError(f"Expected all output tensors to have same shape as the source {what} "
                               f"{tuple(like.shape)}, but output tensor at index {i} has shape {tuple(o.shape)}")


def broadcast(tensor, devices=None, *, out=None):
    """musa side of ``torch.nn.parallel.comm.broadcast`` (torch 2.11-2.15)."""
    from torch._utils import _handle_complex

    tensor = _handle_complex(tensor)
    if not ((devices is None) ^ (out is None)):
        raise RuntimeError(
            f"Exactly one of 'devices' and 'out' must be specified, but got devices={devices} and out={out}")
    if devices is not None:
        return tuple(_broadcast_to(tensor, [_index(d) for d in devices]))
    _check_out(out, tensor, "tensor")
    for o in out:
        with _device.device(o.get_device()):
            o.copy_(tensor, non_blocking=True)
    return tuple(out)


def broadcast_coalesced(tensors, devices, buffer_size=10485760):
    """musa side of ``torch.nn.parallel.comm.broadcast_coalesced`` (torch 2.11-2.15), as
    torch::cuda::broadcast_coalesced: the first device's list holds the tensors themselves, the
    others get the copies of buffers of at most ``buffer_size`` bytes, unflattened into tensors
    with their own version counters."""
    from torch._utils import (
        _flatten_dense_tensors, _handle_complex, _reorder_tensors_as, _take_tensors, _unflatten_dense_tensors)

    devices = [_index(d) for d in devices]
    tensors = [_handle_complex(t) for t in tensors]
    if not devices:
        raise RuntimeError("Expected at least one device to broadcast to")
    for t in tensors:
        if t.get_device() != devices[0]:
            raise RuntimeError("All tensors must be on devices[0]: " + str(devices[0]))
        if t.layout != torch.strided:
            raise RuntimeError(f"broadcast_coalesced on musa supports dense tensors only, got {t.layout}")
    outputs = [list(tensors)] + [[] for _ in devices[1:]]
    if len(devices) == 1:
        return outputs
    chunks = list(_take_tensors(tensors, buffer_size))
    for chunk in chunks:
        flat = _flatten_dense_tensors(chunk)
        copies = _broadcast_to(flat, devices)
        for i in range(1, len(devices)):
            outputs[i].extend(t.data for t in _unflatten_dense_tensors(copies[i], chunk))
    if len(chunks) > 1:
        for i in range(1, len(devices)):
            outputs[i] = list(_reorder_tensors_as(outputs[i], tensors))
    return outputs


def reduce_add(inputs, destination=None):
    """musa side of ``torch.nn.parallel.comm.reduce_add`` (torch 2.11-2.15): the sum on the
    destination musa device (default: the current one), the other inputs copied there on its
    current stream (torch's NCCL branch is CUDA-only)."""
    destination = _device.current_device() if destination is None else _index(destination)
    input_size = inputs[0].size()
    root_index = None
    for i, inp in enumerate(inputs):
        if not _is_musa_tensor(inp):
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
    dst = torch.device("musa", destination)
    nonroot = [t for i, t in enumerate(inputs) if i != root_index]
    with _device.device(destination):
        result = inputs[root_index] + nonroot[0].to(device=dst, non_blocking=True)
        for other in nonroot[1:]:
            result.add_(other.to(device=dst, non_blocking=True))
    return result


def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    """musa side of ``torch.nn.parallel.comm.scatter`` (torch 2.11-2.15), as torch::cuda::scatter:
    chunks already on their device stay views; the others are copied, each on its musa stream in
    ``streams`` when one is given (DataParallel's background copy streams), else on the current one."""
    from torch._utils import _handle_complex

    tensor = _handle_complex(tensor)
    dim = dim + tensor.dim() if dim < 0 else dim
    src = tensor.get_device() if _is_musa_tensor(tensor) else -1
    if out is None:
        devices = [_index(d) for d in devices]
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
            stream = _musa_stream_or_none(streams, i, d)
            with _device.device(d), _streams.stream(stream):
                chunks[i] = chunk.to(torch.device("musa", d), non_blocking=True)
        return tuple(chunks)
    if devices is not None:
        raise RuntimeError(f"'devices' must not be specified when 'out' is specified, but got devices={devices}")
    if chunk_sizes is not None:
        raise RuntimeError(
            f"'chunk_sizes' must not be specified when 'out' is specified, but got chunk_sizes={chunk_sizes}")
    _check_out(out, tensor, "tensor", dim=dim)
    sizes = [o.size(dim) for o in out]
    if sum(sizes) != tensor.size(dim):
        raise RuntimeError(f"Total size for output tensors along scatter dim ({sum(sizes)}) does not match "
                           f"the size of the source tensor along that dim ({tensor.size(dim)})")
    for i, (o, chunk) in enumerate(zip(out, tensor.split(sizes, dim))):
        stream = _musa_stream_or_none(streams, i, o.get_device())
        with _device.device(o.get_device()), _streams.stream(stream):
            o.copy_(chunk, non_blocking=True)
    return tuple(out)


def _gather_into(tensors, out, dim):
    for i, (piece, t) in enumerate(zip(out.split([t.size(dim) for t in tensors], dim), tensors)):
        if out.device.type == "musa":
            with _device.device(out.get_device()):
                piece.copy_(t, non_blocking=True)
        else:
            piece.copy_(t)
    return out


def _gather_check(tensors, dim):
    first = tensors[0]
    expected = list(first.shape)
    total = 0
    for i, t in enumerate(tensors):
        if not _is_musa_tensor(t):
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


def _memory_format(t):
    """ATen's suggest_memory_format (which Python does not expose): channels-last strides, else contiguous."""
    last = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    if last is not None and not t.is_contiguous() and t.is_contiguous(memory_format=last):
        return last
    return torch.contiguous_format


def gather(tensors, dim=0, destination=None, *, out=None):
    """musa side of ``torch.nn.parallel.comm.gather`` (torch 2.11-2.15), as torch::cuda::gather:
    the concatenation written into a tensor on ``destination`` (a musa device, default the current
    one, or the CPU), each piece copied on the destination's current stream."""
    import warnings

    from torch._utils import _get_device_index, _handle_complex

    tensors = [_handle_complex(t) for t in tensors]
    if not tensors:
        raise RuntimeError("Expected at least one tensor to gather from")
    dim = dim + tensors[0].dim() if dim < 0 else dim
    shape = _gather_check(tensors, dim)
    if out is not None:
        if destination is not None:
            raise RuntimeError(
                f"'destination' must not be specified when 'out' is specified, but got destination={destination}")
        if list(out.shape) != shape:
            raise RuntimeError(f"Expected out tensor to have shape {shape}, but got {list(out.shape)}")
        return _gather_into(tensors, out, dim)
    if destination == -1:
        warnings.warn('Using -1 to represent CPU tensor is deprecated. Please use a device object or string '
                      'instead, e.g., "cpu".', FutureWarning, stacklevel=3)
    index = _device.current_device() if destination is None else _get_device_index(destination, allow_cpu=True)
    device = torch.device("cpu") if index == -1 else torch.device("musa", index)
    formats = {_memory_format(t) for t in tensors}
    fmt = formats.pop() if len(formats) == 1 else torch.contiguous_format
    result = torch.empty(shape, dtype=tensors[0].dtype, device=device, memory_format=fmt)
    return _gather_into(tensors, result, dim)
