"""torch_musa: makes ``torch.device("musa")`` a complete PyTorch device.

``torch.musa`` is this module; its API follows ``torch.cuda``.
"""
import sys as _sys


def _autoload():
    """Entry point for torch's device-backend autoloading; importing did the work.

    Defined before anything imports torch: `import torch_musa` first makes
    torch autoload this (then half-initialized) module and call it.
    """


# First, before any submodule loads: the torch version checks, the native extension, and the
# PrivateUse1 backend named "musa" (submodules build torch.device("musa") at import).
from ._core import registration as _registration  # noqa: E402

_registration.prepare()

import torch  # noqa: E402

from . import _version_gate  # noqa: E402  (torch.cuda names newer torches added: __getattr__)
from ._core.device import (  # noqa: E402
    _DeviceGuard,
    _exchange_device,
    _lazy_init,
    _maybe_exchange_device,
    current_device,
    device,
    device_count,
    device_of,
    get_arch_list,
    get_device_capability,
    get_device_name,
    get_gencode_flags,
    get_device_properties,
    is_available,
    is_bf16_supported,
    is_fp8_supported,
    is_tf32_supported,
    can_device_access_peer,
    is_initialized,
    init,
    set_device,
    synchronize,
    get_driver_name,
    get_sync_debug_mode,
    set_sync_debug_mode,
)
has_half = True  # torch.cuda.has_half: musa computes in float16
_get_device_properties = get_device_properties  # torch.cuda's private name for it (torch_musa's core.device calls it)
AcceleratorError = torch.AcceleratorError  # what a failed musa runtime call raises, as torch.cuda's
from ._core.monitor import (  # noqa: E402
    clock_rate, device_memory_used, list_gpu_processes, memory_usage, power_draw, temperature, utilization,
)

from .streams import (  # noqa: E402
    Event, ExternalStream, Stream, StreamContext, _sleep, current_stream, default_stream, get_stream_from_external,
    set_stream, stream,
)
from .graphs import MUSAGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables  # noqa: E402
from .graphs.lifecycle import *  # noqa: E402,F401,F403  (torch.cuda's graph hooks, torch 2.14+)
from .graphs.lifecycle import __all__ as _graph_hook_names  # noqa: E402
from .graphs import dynamo_backend as _dynamo_musagraphs, lifecycle as _graph_lifecycle  # noqa: E402,F401  (earlier paths)
from .graphs import update_musa_graph_with_profile  # noqa: E402,F401  (torch_musa's name)
from . import graphs as musa_graph  # noqa: E402,F401  (torch_musa.musa_graph, torch_musa's module path)
from . import _inductor  # noqa: E402  (cheap: it imports no torch._dynamo)
from . import memory  # noqa: E402
from .memory import (  # noqa: E402
    MemPool,
    MemPoolContext,
    OutOfMemoryError,
    caching_allocator_alloc,
    caching_allocator_delete,
    caching_allocator_disabled,
    caching_allocator_enable,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_cached,
    memory_cached,
    memory_snapshot,
    memory_stats_as_nested_dict,
    reset_max_memory_cached,
    use_mem_pool,
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .random import (  # noqa: E402
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from . import amp, ops, optim  # noqa: E402
from . import fp8  # noqa: E402  (the fused casts' CUDA kernels; Triton loads on first use)
from . import nn  # noqa: E402  (the fused LLM ops: torch.nn.RoPE, SwishGLU, fused RMSNorm and cross entropy)
from . import distributed, mccl  # noqa: E402
from ._core import device as _device_module  # noqa: E402
from .cuda_compat import enable_cuda_compat  # noqa: E402  (torch_musa.cuda_compat is utils.cuda_compat)
from .amp import get_amp_supported_dtype  # noqa: E402
from ._core.tensor_types import TYPES as _LEGACY_TENSOR_TYPES  # noqa: E402

globals().update(_LEGACY_TENSOR_TYPES)  # torch.musa.FloatTensor, ...
from .ipc import reducers as _multiprocessing  # noqa: E402
ipc_collect = _multiprocessing.ipc_collect
from . import ipc  # noqa: E402,F401  (torch.musa.ipc: export_tensor / open_tensor)
from .memory.unified import use_unified_cpu_allocator  # noqa: E402  (torch_musa's unified memory)
from . import comm  # noqa: E402,F401  (torch.musa.comm, as torch.cuda.comm)
from . import nvtx  # noqa: E402,F401  (torch.musa.nvtx, as torch.cuda.nvtx: ranges in torch.profiler)
from . import core, multi_tensor_apply  # noqa: E402,F401  (torch_musa's module paths; profiler: __getattr__)
from .random import fork_rng  # noqa: E402,F401  (torch_musa.fork_rng)


def __getattr__(name):
    # torch.cuda._initialized, read live: torch.utils.checkpoint saves and restores a device's
    # RNG state only where the device module says it is initialized.
    if name == "_initialized":
        return _device_module.is_initialized()
    # torch.cuda.default_generators: a tuple, one per device (torch's RNG helpers index it)
    if name == "default_generators":
        return random.default_generators()
    # torch.musa.profiler (TorchTidy's anti-patterns for musa) loads on first use: torch's pattern
    # matcher imports torch.utils.benchmark, cpp_extension and setuptools, about 0.1-0.2 s of
    # every `import torch` otherwise.
    if name == "profiler":
        import importlib

        return importlib.import_module(".profiler", __name__)
    # Inductor finds a PrivateUse1 device's code generation as torch.<device>.Scheduling etc.
    if name in _inductor.INDUCTOR_HOOK_NAMES:
        return _inductor.device_module_attr(name)
    # torch.cuda names newer torches added that torch.musa does not provide yet say so.
    err = _version_gate.unsupported_graph_api("torch.musa", name)
    if err is not None:
        raise err
    raise AttributeError(f"module 'torch_musa' has no attribute '{name}'")


def _is_in_bad_fork() -> bool:
    return _device_module._in_bad_fork


__all__ = [
    "Event", "ExternalStream", "Stream", "StreamContext", "OutOfMemoryError", "amp", "current_device", "current_stream",
    "get_stream_from_external", "has_half",
    "default_stream", "device", "device_count", "device_of", "empty_cache", "get_amp_supported_dtype",
    "get_device_capability", "get_device_name", "get_device_properties", "get_rng_state", "get_rng_state_all",
    "init", "initial_seed", "is_available", "is_bf16_supported", "is_fp8_supported", "is_tf32_supported", "can_device_access_peer", "is_initialized", "manual_seed",
    "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_stats", "memory_summary", "reset_accumulated_memory_stats",
    "reset_max_memory_allocated", "reset_peak_memory_stats", "seed", "seed_all", "set_device",
    "set_per_process_memory_fraction", "set_rng_state", "set_rng_state_all", "set_stream", "stream",
    "synchronize", "get_driver_name", "enable_cuda_compat", "memory", "use_unified_cpu_allocator",
    "MemPool", "MemPoolContext", "use_mem_pool",
    "caching_allocator_alloc", "caching_allocator_delete", "get_allocator_backend", "get_per_process_memory_fraction",
    "memory_cached", "max_memory_cached", "memory_snapshot", "memory_stats_as_nested_dict", "reset_max_memory_cached",
    "distributed", "mccl",
    "MUSAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables",
    *_graph_hook_names,
]

# Last: everything that makes musa a torch device (backends, reducers, gates, torch.musa's
# registration, the generated tensor methods), in its order, with the finished module.
_registration.install(_sys.modules[__name__])
