"""Dynamo's DeviceInterface for musa: what torch.compile asks of a device.

Dynamo traces the stream and event calls it finds here (``torch.musa.current_stream()``,
``torch.musa.stream(s)``, ``torch.musa.Event()``) the way it traces torch.cuda's,
and Inductor uses the rest for device guards, raw streams to launch on, and
device properties in its compile workers (which must not start the runtime).
"""
from __future__ import annotations

from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface, caching_worker_current_devices, \
    caching_worker_device_properties

from .. import _C, memory, streams
from .._core import device as _device

_TYPE = "musa"


def _is_cuda_driver() -> bool:
    return _device.get_driver_name() == "cuda"


def get_raw_stream(device_index: int) -> int:
    """The driver's handle of the current musa stream (a cudaStream_t on the cuda driver)."""
    return _C._current_raw_stream(device_index)


def _graph_cuda_device(device: Any) -> Any:
    """The CUDA device a kernel-device graph names, or None.

    On the cuda driver Inductor compiles a musa graph as the CUDA graph over the same memory
    (kernel_device_pass.py), while the graph's device type stays ``musa``; its fusion
    benchmarks then hand this interface the graph's CUDA device. Only then is a CUDA device
    accepted here; torch.musa's own calls keep refusing one, as torch.cuda refuses musa.
    """
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device) and device.type == "cuda" and _is_cuda_driver():
        return device
    return None


def _device_scope(device: Any) -> Any:
    cuda = _graph_cuda_device(device)
    return torch.cuda.device(cuda) if cuda is not None else _device.device(device)


def _properties_of(device: Any) -> Any:
    cuda = _graph_cuda_device(device)
    if cuda is not None:
        return torch.cuda.get_device_properties(cuda)
    return _properties(_device._index(device))


def _properties(index: int) -> Any:
    """Device properties Inductor reads (SM count, warp size, registers, ...).

    On the cuda driver a musa device is a CUDA device, so its CUDA properties are
    the ones Triton needs to pick launch configurations.
    """
    if _is_cuda_driver():
        return torch.cuda.get_device_properties(_C._driver_ordinal(index))
    return _device.get_device_properties(index)


class MusaInterface(DeviceInterface):
    device = staticmethod(_device_scope)  # type: ignore[assignment]
    Event = streams.Event  # type: ignore[assignment]
    Stream = streams.Stream  # type: ignore[assignment]

    class Worker:
        """Answers from values the parent process recorded (workers never start the runtime)."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices[_TYPE] = device

        @staticmethod
        def current_device() -> int:
            if _TYPE in caching_worker_current_devices:
                return caching_worker_current_devices[_TYPE]
            return _device.current_device()

        @staticmethod
        def get_device_properties(device: torch.types.Device = None) -> Any:
            if _graph_cuda_device(device) is not None:
                return _properties_of(device)
            index = MusaInterface.Worker.current_device() if device is None else _device._index(device)
            if _TYPE not in caching_worker_device_properties:
                caching_worker_device_properties[_TYPE] = [
                    _properties(i) for i in range(_device.device_count())
                ]
            return caching_worker_device_properties[_TYPE][index]

    current_device = staticmethod(_device.current_device)
    set_device = staticmethod(_device.set_device)
    device_count = staticmethod(_device.device_count)
    stream = staticmethod(streams.stream)  # type: ignore[assignment]
    current_stream = staticmethod(streams.current_stream)
    set_stream = staticmethod(streams.set_stream)  # type: ignore[assignment]
    synchronize = staticmethod(_device.synchronize)
    get_raw_stream = staticmethod(get_raw_stream)  # type: ignore[assignment]
    exchange_device = staticmethod(_device._exchange_device)
    maybe_exchange_device = staticmethod(_device._maybe_exchange_device)
    memory_allocated = staticmethod(memory.memory_allocated)
    is_bf16_supported = staticmethod(_device.is_bf16_supported)  # type: ignore[arg-type]

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        streams.set_stream(streams.Stream(stream_id=stream_id, device_index=device_index,
                                                device_type=device_type))

    @staticmethod
    def get_device_properties(device: torch.types.Device = None) -> Any:  # type: ignore[override]
        return _properties_of(device)

    @staticmethod
    def is_available() -> bool:
        return _device.is_available()

    @staticmethod
    def get_compute_capability(device: torch.types.Device = None) -> Any:
        # Triton's target on the cuda driver; the host driver compiles C++ and needs none.
        if _is_cuda_driver():
            major, minor = _device.get_device_capability(device)
            return major * 10 + minor
        return ""

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        return _is_cuda_driver() and _device.get_device_capability(device)[0] >= 7

    @staticmethod
    def raise_if_triton_unavailable(device: torch.types.Device = None) -> None:
        if not _is_cuda_driver():
            raise RuntimeError(
                "Triton kernels need the musa device on a GPU (TORCH_MUSA_DRIVER=cuda); the host driver "
                "compiles C++ kernels instead (torch._inductor.config.cpu_backend='cpp')"
            )
        import triton.backends

        if "nvidia" not in triton.backends.backends:
            raise RuntimeError("triton was not built with the 'nvidia' backend, which musa's cuda driver uses")


def register() -> None:
    """Makes the interface known to Dynamo for ``musa`` and ``musa:N``."""
    from torch._dynamo.device_interface import register_interface_for_device

    register_interface_for_device(_TYPE, MusaInterface)
    for i in range(_device.device_count()):
        register_interface_for_device(f"{_TYPE}:{i}", MusaInterface)
