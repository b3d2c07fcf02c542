"""Device management, shaped like torch.cuda's."""
import dataclasses
from typing import Any, Optional, Union

import torch

from .. import _C

_DeviceLike = Union[torch.device, str, int, None]
_initialized = False
_in_bad_fork = False
_init_hooks = []  # _on_first_init's calls, made when the runtime starts


def _after_fork_in_child():
    # A child forked after musa started in the parent must not use it, as with CUDA: the cuda
    # driver's context does not survive fork, and the host driver's device memory is a shared
    # mapping (the backend refuses every allocation there too, _C._in_bad_fork()).
    global _in_bad_fork, _initialized
    if _initialized or _C._in_bad_fork():
        _in_bad_fork, _initialized = True, False


import os as _os  # noqa: E402

_os.register_at_fork(after_in_child=_after_fork_in_child)


def _index(device: _DeviceLike = None, optional: bool = True) -> int:
    """Turns a device argument into a musa device index (current device if None)."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "musa":
            raise ValueError(f"Expected a musa device, but got: {device}")  # torch.cuda's wording
        return current_device() if device.index is None else device.index
    if device is None:
        if not optional:
            raise ValueError("a musa device is required")
        return current_device()
    if isinstance(device, int):
        return device
    raise TypeError(f"expected a musa device (torch.device, 'musa:N' or int), got {type(device).__name__}")


def _check_index(index: int) -> int:
    n = device_count()
    if n == 0:
        raise RuntimeError(f"no musa device is available: {_C._init_error() or 'device count is 0'}")
    if not 0 <= index < n:
        raise RuntimeError(
            f"invalid musa device index {index}: there {'is 1 musa device' if n == 1 else f'are {n} musa devices'}, "
            f"valid indices are 0..{n - 1}"
        )
    return index


def _lazy_init() -> None:
    """Starts the runtime on first use (nothing happens at import)."""
    global _initialized
    if _initialized:
        return
    if _in_bad_fork:
        raise RuntimeError(
            "Cannot re-initialize MUSA in forked subprocess. To use MUSA with multiprocessing, you must use "
            "the 'spawn' start method (torch.multiprocessing.set_start_method('spawn'))"
        )
    if device_count() == 0:
        raise RuntimeError(f"no musa device is available: {_C._init_error() or 'device count is 0'}")
    _initialized = True
    for hook in _init_hooks:
        hook()


def _on_first_init(hook) -> None:
    """Runs ``hook()`` on the thread that starts the runtime (now, if it has started)."""
    if _initialized:
        hook()
    else:
        _init_hooks.append(hook)


def init() -> None:
    _lazy_init()


def is_initialized() -> bool:
    return _initialized


def is_available() -> bool:
    return device_count() > 0


def device_count() -> int:
    return _C._device_count()


def get_driver_name() -> str:
    """The runtime driver in use: 'host' (emulated in host memory) or 'cuda'."""
    return _C._driver_name()


def current_device() -> int:
    return _C._current_device()


def set_device(device: _DeviceLike) -> None:
    index = _index(device)
    if index >= 0:
        _C._set_device(_check_index(index))


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for all work on the device's streams to finish."""
    _lazy_init()
    _C._synchronize(_check_index(_index(device)))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode) -> None:
    """As torch.cuda.set_sync_debug_mode: operations that make the host wait for a musa device
    (a blocking copy to the cpu, ``.item()``, ``nonzero`` and other ops whose output size
    depends on the data, ``Stream.synchronize``) warn ("warn" or 1) or raise ("error" or 2);
    "default" or 0 turns it off. On the cuda driver musa's kernels are CUDA's, so this sets
    CUDA's mode too (one setting per process, as the GPU is one)."""
    _lazy_init()
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError(f'invalid value of debug_mode {debug_mode!r}: expected "default", "warn" or "error"')
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    _C._set_sync_debug_mode(int(debug_mode))
    if get_driver_name() == "cuda":
        torch._C._cuda_set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    _lazy_init()
    return _C._get_sync_debug_mode()


@dataclasses.dataclass(frozen=True)
class _MusaDeviceProperties:
    """A device's properties (the attributes of torch.cuda's _CudaDeviceProperties that apply).
    A plain object, not a tuple: Dynamo folds it to a constant as it folds torch.cuda's (torch
    2.11's Dynamo takes a namedtuple for a list and stops)."""
    name: str
    total_memory: int
    multi_processor_count: int
    major: int
    minor: int
    warp_size: int
    max_threads_per_block: int
    L2_cache_size: int
    is_host_emulated: bool
    uuid: str
    is_integrated: int
    is_multi_gpu_board: int
    max_threads_per_multi_processor: int
    regs_per_multiprocessor: int
    shared_memory_per_block: int
    shared_memory_per_multiprocessor: int
    shared_memory_per_block_optin: int
    clock_rate: int  # kHz
    memory_clock_rate: int  # kHz
    memory_bus_width: int  # bits
    pci_bus_id: int
    pci_device_id: int
    pci_domain_id: int


def get_device_properties(device: _DeviceLike = None) -> Any:
    _lazy_init()
    props = _C._device_properties(_check_index(_index(device)))
    return _MusaDeviceProperties(**props)


def get_device_name(device: _DeviceLike = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: _DeviceLike = None) -> tuple:
    p = get_device_properties(device)
    return p.major, p.minor


def get_arch_list() -> list:
    """The device architectures musa's kernels are built for, as torch.cuda.get_arch_list: on the
    cuda driver torch's CUDA kernels' (``sm_90``, ...: they run musa's ops); on the host driver the
    emulated MUSA architecture its capability names (``mp_31`` for 3.1)."""
    if not is_available():
        return []
    if get_driver_name() == "cuda":
        return torch.cuda.get_arch_list()
    major, minor = get_device_capability(0)
    return [f"mp_{major}{minor}"]


def get_gencode_flags() -> str:
    """The device compiler's flags for get_arch_list() (torch.cuda's gencode flags on the cuda
    driver). The host driver's kernels are the CPU's: no device compiler, no flags."""
    if not is_available() or get_driver_name() != "cuda":
        return ""
    return torch.cuda.get_gencode_flags()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether the current musa device computes in bfloat16, as torch_musa answers it: natively
    from MUSA architecture 2.2 (the host driver reports 3.1; on the cuda driver, the GPU's
    own bfloat16 support), else only ``including_emulation`` (bfloat16 tensors still work)."""
    if not is_available():
        return False
    if get_driver_name() == "host":
        return True  # capability 3.1 >= 2.2
    return torch.cuda.get_device_properties(_C._driver_ordinal(current_device())).major >= 8 or including_emulation


def is_fp8_supported(device: _DeviceLike = None) -> bool:
    """Whether the musa device runs float8 matmuls (torch._scaled_mm) natively. The host driver
    emulates FP8 (it reports MUSA architecture 3.1, the first with FP8); on the cuda driver it is
    the GPU's answer (compute capability 8.9 and newer: Ada, Hopper, Blackwell)."""
    if not is_available():
        return False
    if get_driver_name() == "host":
        return True
    return torch.cuda.get_device_capability(_C._driver_ordinal(_index(device))) >= (8, 9)


def is_tf32_supported() -> bool:
    """Whether the current musa device has TF32, as torch_musa answers it (its native bfloat16
    support: MUSA architecture 2.2 and newer). The host driver reports capability 3.1, so True
    (its CPU kernels compute float32 in full precision either way); on the cuda driver it is the
    GPU's answer (Ampere and newer), as torch.cuda's."""
    if not is_available():
        return False
    if get_driver_name() == "host":
        return True  # capability 3.1 >= 2.2
    return torch.cuda.get_device_properties(_C._driver_ordinal(current_device())).major >= 8


def can_device_access_peer(device: _DeviceLike, peer_device: _DeviceLike) -> bool:
    """Whether ``device`` can access ``peer_device``'s memory directly (torch.cuda's contract:
    invalid ids raise). Emulated host devices share the host's memory, so any two distinct ones
    can; on the cuda driver it is CUDA's peer-access answer for the GPUs underneath."""
    _lazy_init()
    device, peer_device = _index(device), _index(peer_device, optional=False)
    if not 0 <= device < device_count():
        raise AssertionError("Invalid device id")
    if not 0 <= peer_device < device_count():
        raise AssertionError("Invalid peer device id")
    if get_driver_name() == "host":
        return device != peer_device
    return torch.cuda.can_device_access_peer(_C._driver_ordinal(device), _C._driver_ordinal(peer_device))


def _exchange_device(device: int) -> int:
    """Makes ``device`` current and returns the previous one (negative: no change), as torch.cuda's."""
    if device < 0:
        return -1
    prev = current_device()
    if prev != device:
        set_device(device)
    return prev


def _maybe_exchange_device(device: int) -> int:
    """Like :func:`_exchange_device`, without starting the runtime if it is not started."""
    if device < 0:
        return -1
    if not _initialized:
        return -1
    return _exchange_device(device)


class _DeviceGuard:
    """The index-only device guard generated code uses (torch.cuda._DeviceGuard's counterpart)."""

    def __init__(self, index: int):
        self.idx = index
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _exchange_device(self.idx)

    def __exit__(self, *args):
        self.idx = _maybe_exchange_device(self.prev_idx)
        return False


class device:
    """Context manager that changes the current musa device."""

    def __init__(self, device: _DeviceLike):
        self.idx = _index(device) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        if self.idx < 0:
            return self
        self.prev_idx = current_device()
        if self.prev_idx != self.idx:
            set_device(self.idx)
        return self

    def __exit__(self, *args):
        if self.idx >= 0 and self.prev_idx != self.idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of a tensor current (no-op for non-musa tensors)."""

    def __init__(self, obj):
        idx = obj.get_device() if getattr(obj, "is_musa", False) else -1
        super().__init__(idx if idx >= 0 else None)
