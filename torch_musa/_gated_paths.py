"""Run-time wrappers around torch Python functions that hard-code a device list or call
CUDA-only ``torch._C`` functions without a dispatch point.

Every wrapper here changes behaviour for musa arguments only: any other call goes to torch's
own function, untouched. Each names in its docstring the torch function and the torch versions it
adapts; version differences are decided in ``_version_gate``. Sections are owned by topic; keep
each section's edits inside its markers.
"""


def _wrap_once(originals: dict, owner, owner_name: str, attr: str, make) -> None:
    """Replaces ``owner.attr`` with ``make(torch's function)``, keeping torch's in ``originals``;
    nothing when installed already, or when this torch lacks the function (nothing to adapt)."""
    key = (owner_name, attr)
    if key in originals or not hasattr(owner, attr):
        return
    originals[key] = getattr(owner, attr)
    setattr(owner, attr, make(originals[key]))


# ============================================================================================
# BEGIN SECTION: DataParallel (torch.nn.parallel.comm, torch._utils, DataParallel.__init__)
# ============================================================================================
import contextvars as _contextvars
import functools as _functools

import torch as _torch

_dp_originals = {}  # (module name, attribute) -> torch's own function
_dp_device_type = _contextvars.ContextVar("torch_musa_data_parallel_device_type", default=None)


def _musa_comm():
    from . import comm

    return comm


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


def _dp_wrap_broadcast(torch_fn):
    @_functools.wraps(torch_fn)
    def broadcast(tensor, devices=None, *, out=None):
        """Adapts torch.nn.parallel.comm.broadcast (torch 2.11-2.15; torch.cuda.comm re-exports it):
        torch calls torch._C._broadcast / _broadcast_out, CUDA-only (absent from CPU builds). A musa
        tensor, musa ``out`` tensors, or a CPU tensor sent to musa devices go to ``torch.musa.comm.broadcast``."""
        if (_dp_is_musa_tensor(tensor) or any(_dp_is_musa_tensor(o) for o in (out or ()))
                or (out is None and isinstance(tensor, _torch.Tensor) and tensor.device.type == "cpu"
                    and _dp_targets_musa(devices))):
            return _musa_comm().broadcast(tensor, devices, out=out)
        return torch_fn(tensor, devices, out=out)

    return broadcast


def _dp_wrap_broadcast_coalesced(torch_fn):
    @_functools.wraps(torch_fn)
    def broadcast_coalesced(tensors, devices, buffer_size=10485760):
        """Adapts torch.nn.parallel.comm.broadcast_coalesced (torch 2.11-2.15): torch calls
        torch._C._broadcast_coalesced, CUDA-only. Musa tensors go to ``torch.musa.comm.broadcast_coalesced``
        (DataParallel's replicate and Broadcast use it)."""
        tensors = list(tensors)
        if any(_dp_is_musa_tensor(t) for t in tensors):
            return _musa_comm().broadcast_coalesced(tensors, devices, buffer_size)
        return torch_fn(tensors, devices, buffer_size)

    return broadcast_coalesced


def _dp_wrap_reduce_add(torch_fn):
    @_functools.wraps(torch_fn)
    def reduce_add(inputs, destination=None):
        """Adapts torch.nn.parallel.comm.reduce_add (torch 2.11-2.15): torch's default destination
        is the current device of the first available device type (CUDA where present) and it asks
        torch.cuda.nccl first (a warning on CPU builds). Musa inputs go to ``torch.musa.comm.reduce_add``;
        reduce_add_coalesced reaches this through the module global."""
        if any(_dp_is_musa_tensor(t) for t in inputs):
            return _musa_comm().reduce_add(inputs, destination)
        return torch_fn(inputs, destination)

    return reduce_add


def _dp_wrap_scatter(torch_fn):
    @_functools.wraps(torch_fn)
    def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
        """Adapts torch.nn.parallel.comm.scatter (torch 2.11-2.15): torch calls torch._C._scatter /
        _scatter_out, CUDA-only. A musa tensor, musa ``out`` tensors, or a CPU tensor sent to musa
        devices or on musa streams go to ``torch.musa.comm.scatter``."""
        if (_dp_is_musa_tensor(tensor) or any(_dp_is_musa_tensor(o) for o in (out or ()))
                or (out is None and isinstance(tensor, _torch.Tensor) and tensor.device.type == "cpu"
                    and _dp_targets_musa(devices, streams))):
            return _musa_comm().scatter(tensor, devices, chunk_sizes, dim, streams, out=out)
        return torch_fn(tensor, devices, chunk_sizes, dim, streams, out=out)

    return scatter


def _dp_wrap_gather(torch_fn):
    @_functools.wraps(torch_fn)
    def gather(tensors, dim=0, destination=None, *, out=None):
        """Adapts torch.nn.parallel.comm.gather (torch 2.11-2.15): torch calls torch._C._gather /
        _gather_out, CUDA-only. Musa input tensors go to ``torch.musa.comm.gather``."""
        tensors = list(tensors)
        if any(_dp_is_musa_tensor(t) for t in tensors):
            return _musa_comm().gather(tensors, dim, destination, out=out)
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


# ============================================================================================
# BEGIN SECTION: flex_attention (torch.nn.attention.flex_attention, Inductor's flex configs)
# ============================================================================================
_fa_originals = {}  # (owner name, attribute) -> torch's own function


def _fa_wrap_validate_device(torch_fn):
    @_functools.wraps(torch_fn)
    def _validate_device(query, key, value):
        """Adapts torch.nn.attention.flex_attention._validate_device (torch 2.11-2.15), which
        flex_attention() calls through the module global: it accepts a hard-coded device list
        ({"cuda", "cpu", "xpu", "hpu", "mps"}) and raises ValueError for any other. A musa query
        passes (with backward, as on CUDA: eager runs torch's dense implementation of the
        higher-order op over musa memory; compiled graphs get Inductor's kernels); any other
        query gets torch's check. Like torch, it looks at the query only (flex_attention has
        checked that q, k and v share a device)."""
        if isinstance(query, _torch.Tensor) and query.device.type == "musa":
            return None
        return torch_fn(query, key, value)

    return _validate_device


def _fa_wrap_get_config_heuristics(torch_fn):
    @_functools.wraps(torch_fn)
    def get_config_heuristics(self, device_type="cuda"):
        """Adapts torch._inductor.choices.InductorChoices.get_config_heuristics (torch 2.11-2.15),
        whose device list (cuda, xpu, cpu, mtia) gives every other device the generic
        BaseConfigHeuristic: its flex_attention backward config is 16x16 blocks, several times
        slower than CUDA's. On the cuda driver musa is the same NVIDIA GPU, so "musa" gets torch's
        answer for "cuda" (flex_attention forward, backward and decoding configs, and the conv
        configs that ask the same method). On the host driver, and for any other device type,
        it is torch's answer."""
        if device_type == "musa" and _fa_on_cuda_driver():
            device_type = "cuda"
        return torch_fn(self, device_type)

    return get_config_heuristics


def _fa_on_cuda_driver() -> bool:
    import torch_musa

    return torch_musa.get_driver_name() == "cuda"


def _fa_install_frontend(module) -> None:
    _wrap_once(_fa_originals, module, "torch.nn.attention.flex_attention", "_validate_device",
               _fa_wrap_validate_device)


def _fa_install_choices(module) -> None:
    _wrap_once(_fa_originals, module.InductorChoices, "InductorChoices", "get_config_heuristics",
               _fa_wrap_get_config_heuristics)


def install_flex_attention() -> None:
    """Installs the flex_attention wrappers when their torch modules load (``import torch`` loads
    neither torch.nn.attention.flex_attention nor Inductor), or at once if they have."""
    from torch_musa._import_hooks import after_import

    after_import("torch.nn.attention.flex_attention", _fa_install_frontend)
    after_import("torch._inductor.choices", _fa_install_choices)


# ============================================================================================
# END SECTION: flex_attention
# ============================================================================================


# ============================================================================================
# BEGIN SECTION: profiler (torch.profiler._utils.BasicEvaluation)
# ============================================================================================

_pr_originals: dict = {}

# The musa runtime's kernel launches (backend/profiler: one per launch on a musa stream, on both
# drivers), as torch's BasicEvaluation looks for CUDA's cudaLaunchKernel. On the cuda driver the
# kernels are CUPTI's, linked to the kernel device's op inside the musa op: there CUPTI's own
# launch calls (one level below musa's) are the ones that pair with them.
_PR_MUSA_LAUNCHES = ("musaLaunchKernel", "cudaLaunchKernel", "__cudaLaunchKernel", "cudaLaunchCooperativeKernel",
                     "cuLaunchKernel")


def _pr_event_name(e) -> str:
    name = getattr(e, "name", e)
    return str(name() if callable(name) else name)


def _pr_is_musa_profile(events) -> bool:
    from torch.autograd import DeviceType

    return any(e.device_type() == DeviceType.PrivateUse1 for e in events)


def _pr_musa_queue_depth(self, events):
    """torch's BasicEvaluation.compute_queue_depth with musa's launches (musaLaunchKernel, and on
    the cuda driver CUPTI's launch calls under them) and kernels (device events of the musa device,
    of kind kernel) in place of CUDA's; the algorithm is torch's, unchanged."""
    from torch.autograd import DeviceType
    from torch.profiler._utils import Interval, index_of_first_match

    def is_launch(e):
        return e.device_type() == DeviceType.CPU and _pr_event_name(e).startswith(_PR_MUSA_LAUNCHES)

    def is_kernel(e):
        kind = e.activity_type() if hasattr(e, "activity_type") else "kernel"
        return e.device_type() == DeviceType.PrivateUse1 and kind == "kernel" and \
            not any(p in _pr_event_name(e).lower() for p in ("mem", "cpy", "alloc", "free"))

    launches = sorted((e for e in events if is_launch(e)), key=lambda x: x.start_ns())
    kernels = sorted((e for e in events if is_kernel(e)), key=lambda x: x.start_ns())
    # musa_events is the name torch_musa programs read (torch.musa's for torch.cuda's cuda_events)
    self.cuda_events = self.musa_events = sorted(launches + kernels, key=lambda x: x.start_ns())

    kernel_mapping = {}
    last_mapped_kernel = 0
    for launch in launches:
        index = index_of_first_match(kernels, lambda x: x.linked_correlation_id() == launch.linked_correlation_id(),
                                     start=last_mapped_kernel)
        kernel_mapping[launch] = index
        last_mapped_kernel = index if index is not None else last_mapped_kernel

    current_kernel_index = 0
    spawned_kernel_index = -1
    queue_depth_list = []
    all_events = launches + kernels + self.events
    all_events.sort(key=lambda e: e.start_ns() if hasattr(e, "start_ns") else e.start_time_ns)
    for event in all_events:
        if hasattr(event, "start_ns"):
            start_time, end_time = event.start_ns(), event.start_ns() + event.duration_ns()
            if kernel_mapping.get(event) is not None:
                spawned_kernel_index = kernel_mapping[event]
        else:
            start_time, end_time = event.start_time_ns, event.end_time_ns
        while current_kernel_index < len(kernels) and kernels[current_kernel_index].start_ns() <= start_time:
            current_kernel_index += 1
        depth = max(spawned_kernel_index - current_kernel_index + 1, 0)
        if hasattr(event, "start_ns"):
            queue_depth_list.append(Interval(start_time, end_time, depth))
        else:
            from torch.profiler._utils import EventKey

            self.metrics[EventKey(event)].queue_depth = depth
    return queue_depth_list


def _pr_wrap_compute_queue_depth(torch_fn):
    def compute_queue_depth(self):
        """Wraps torch.profiler._utils.BasicEvaluation.compute_queue_depth (torch 2.11-2.15), which
        counts CUDA's cudaLaunchKernel calls and DeviceType.CUDA kernels only: for a profile with
        musa device events, the queue depth of musa's launches (musaLaunchKernel) and musa kernels
        instead, so idle time and get_optimizable_events work on musa. Any other profile goes to
        torch's function unchanged (and its ``musa_events`` is empty, as ``cuda_events`` is on a
        profile without CUDA's)."""
        results = getattr(self.profile, "kineto_results", None)
        events = results.events() if results is not None else ()
        if not _pr_is_musa_profile(events):
            self.musa_events = []
            return torch_fn(self)
        return _pr_musa_queue_depth(self, events)

    compute_queue_depth.__wrapped__ = torch_fn
    return compute_queue_depth


def _pr_install_utils(module) -> None:
    owner = getattr(module, "BasicEvaluation", None)
    key = ("BasicEvaluation", "compute_queue_depth")
    if owner is None or key in _pr_originals or not hasattr(owner, "compute_queue_depth"):
        return
    _pr_originals[key] = owner.compute_queue_depth
    owner.compute_queue_depth = _pr_wrap_compute_queue_depth(owner.compute_queue_depth)


def _pr_wrap_fp16_dim_match(torch_fn):
    @_functools.wraps(torch_fn)
    def match(self, event) -> bool:
        """Wraps torch.profiler._pattern_matcher.MatMulDimInFP16Pattern.match (torch 2.11-2.14),
        which takes every event named aten::mm/bmm/addmm for a torch op and asserts so. On CUDA the
        device events carry kernel names; musa's host-driver device events carry the name of the
        aten op that launched them. Such a device event (a Kineto event named "aten::...") is not a
        torch op, so it does not match; every other event goes to torch's match."""
        from torch._C._profiler import _EventType

        if event.tag == _EventType.Kineto and event.name.startswith("aten::"):
            return False
        return torch_fn(self, event)

    return match


def _pr_install_patterns(module) -> None:
    owner = getattr(module, "MatMulDimInFP16Pattern", None)
    if owner is not None:
        _wrap_once(_pr_originals, owner, "MatMulDimInFP16Pattern", "match", _pr_wrap_fp16_dim_match)


def install_profiler() -> None:
    """Installs the profiler wrappers when torch.profiler._utils / _pattern_matcher load, or at
    once if they have."""
    from torch_musa._import_hooks import after_import

    after_import("torch.profiler._utils", _pr_install_utils)
    after_import("torch.profiler._pattern_matcher", _pr_install_patterns)


# ============================================================================================
# END SECTION: profiler
# ============================================================================================


# ============================================================================================
# BEGIN SECTION: distributed (monitored_barrier, torch.cuda.synchronize, DDP's comm-hook check)
# ============================================================================================
def _dist_mccl_backend(group):
    """The mccl backend of `group` (None: the default group) for musa, or None if it has none."""
    import torch.distributed as dist

    from .distributed import ProcessGroupMCCL

    pg = dist.distributed_c10d._get_default_group() if group is None else group
    try:
        backend = pg._get_backend(_torch.device("musa"))
    except (RuntimeError, ValueError):
        return None
    return backend if isinstance(backend, ProcessGroupMCCL) else None


def _dist_wrap_monitored_barrier(torch_fn):
    """torch.distributed.monitored_barrier (2.11-2.15) accepts pure Gloo groups only; on a group
    with mccl for musa it runs mccl's monitored barrier (on the group's CPU store, naming the ranks
    that did not come, as Gloo's). Every other group goes to torch's function."""

    @_functools.wraps(torch_fn)
    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        import torch.distributed as dist

        if not dist.is_initialized() or dist.distributed_c10d._rank_not_in_group(group) \
                or dist.get_backend(group) == dist.Backend.GLOO:
            return torch_fn(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
        backend = _dist_mccl_backend(group)
        if backend is None:
            return torch_fn(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
        from datetime import timedelta

        if timeout is None:
            timeout = dist.distributed_c10d._get_default_timeout(dist.get_backend(group))
        elif isinstance(timeout, (int, float)):
            timeout = timedelta(seconds=timeout)
        return backend.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    monitored_barrier.__torch_musa_wrapped__ = torch_fn
    return monitored_barrier


def _dist_wrap_cuda_synchronize(torch_fn):
    """torch.cuda.synchronize(device) (2.11-2.15) rejects a musa device ("Expected a cuda device");
    torch's own Python calls it with a tensor's device whenever CUDA is present (DDP's PowerSGD
    hooks), so with the cuda driver musa buckets failed. A musa device synchronizes musa."""

    @_functools.wraps(torch_fn)
    def synchronize(device=None):
        if _dp_is_musa_device(device):
            return _torch.musa.synchronize(device)
        return torch_fn(device)

    synchronize.__torch_musa_wrapped__ = torch_fn
    return synchronize


def _dist_wrap_check_comm_hook(torch_fn):
    """DistributedDataParallel._check_comm_hook (2.11-2.15) admits bf16_compress_hook (and its
    wrapper) by name only in a torch built with CUDA and NCCL 2.10+, or XPU and XCCL: a musa DDP's
    buckets go through mccl, which reduces bfloat16 on both drivers, so on a CPU-only torch (the
    host driver) the hook was refused. For a musa DDP the hook is checked as any other hook (its
    signature); every other DDP gets torch's check, refusal included."""

    @_functools.wraps(torch_fn)
    def _check_comm_hook(self, hook):
        if getattr(self, "device_type", None) != "musa" or not callable(hook) or \
                getattr(hook, "__name__", None) not in ("bf16_compress_hook", "bf16_compress_wrapper_hook"):
            return torch_fn(self, hook)

        @_functools.wraps(hook)  # torch reads the signature through __wrapped__
        def checked_as(*args, **kwargs):
            return hook(*args, **kwargs)

        checked_as.__name__ = f"musa_{hook.__name__}"
        return torch_fn(self, checked_as)

    _check_comm_hook.__torch_musa_wrapped__ = torch_fn
    return _check_comm_hook


def _dist_install_ddp(module) -> None:
    ddp = module.DistributedDataParallel
    if getattr(ddp._check_comm_hook, "__torch_musa_wrapped__", None) is None:
        ddp._check_comm_hook = _dist_wrap_check_comm_hook(ddp._check_comm_hook)


def _dist_install_c10d(module) -> None:
    import torch.distributed.distributed_c10d as c10d

    if getattr(c10d.monitored_barrier, "__torch_musa_wrapped__", None) is None:
        c10d.monitored_barrier = _dist_wrap_monitored_barrier(c10d.monitored_barrier)
    if hasattr(module, "monitored_barrier"):
        module.monitored_barrier = c10d.monitored_barrier


def install_distributed() -> None:
    """Installs the distributed wrappers (torch.cuda now; torch.distributed when it loads)."""
    from torch_musa._import_hooks import after_import

    if getattr(_torch.cuda.synchronize, "__torch_musa_wrapped__", None) is None:
        _torch.cuda.synchronize = _dist_wrap_cuda_synchronize(_torch.cuda.synchronize)
    after_import("torch.distributed", _dist_install_c10d)
    after_import("torch.nn.parallel.distributed", _dist_install_ddp)


# ============================================================================================
# END SECTION: distributed
# ============================================================================================


# ============================================================================================
# BEGIN SECTION: graph trees (torch.compile mode="reduce-overhead" / "max-autotune" on musa)
# ============================================================================================
_gt_originals: dict = {}


def _gt_only_musa(device_node_mapping) -> bool:
    """Whether a graph's devices are one musa device (and its kernel device)."""
    import torch_musa
    from torch._inductor import config

    on_cuda = torch_musa.get_driver_name() == "cuda"
    # The kernel device's nodes compute over musa memory (the kernel-device pass: cpu on the
    # host driver, cuda on the cuda driver). Other cpu nodes run outside the graphed partitions
    # when there are partitions, as for cuda.
    ignored = {"meta", "cuda" if on_cuda else "cpu"}
    if getattr(config, "graph_partition", False) and config.triton.cudagraphs:
        ignored.add("cpu")
    if not any(d.type == "musa" for d in device_node_mapping):
        return False
    devices = [d for d in device_node_mapping if d.type not in ignored]
    return all(d.type == "musa" for d in devices) and len({d.index for d in devices}) == 1


def _gt_wrap_check_lowering(torch_fn):
    @_functools.wraps(torch_fn)
    def check_lowering_disable_cudagraph(device_node_mapping):
        """Adapts torch._inductor.cudagraph_utils.check_lowering_disable_cudagraph (torch 2.11-2.15),
        which accepts only graphs of one "cuda" device ("skipping cudagraphs due to multiple
        devices: musa:0"). A graph of one musa device is graphed through MUSA Graph (its checks on
        torch.cuda's allocator do not concern musa memory); any other graph gets torch's answer."""
        if _gt_only_musa(device_node_mapping):
            return None
        return torch_fn(device_node_mapping)

    return check_lowering_disable_cudagraph


def _gt_wrap_cudagraphify_impl(torch_fn):
    @_functools.wraps(torch_fn)
    def cudagraphify_impl(model, inputs, static_input_idxs, *args, **kwargs):
        """Adapts torch._inductor.cudagraph_trees.cudagraphify_impl (torch 2.11-2.15), which
        Inductor's compile_fx.cudagraphify imports when a compiled graph first runs: a graph with
        musa inputs goes to torch's graph trees run over MUSA Graph
        (torch_musa._inductor.graph_trees); any other to torch.cuda's trees."""
        from torch_musa._inductor import graph_trees

        if graph_trees.has_musa_tensor(inputs):
            return graph_trees.cudagraphify_impl(model, inputs, static_input_idxs, *args, **kwargs)
        return torch_fn(model, inputs, static_input_idxs, *args, **kwargs)

    return cudagraphify_impl


def _gt_wrap_post_compile(torch_fn):
    @_functools.wraps(torch_fn)
    def post_compile(self, *args, **kwargs):
        """Adapts torch._inductor.output_code.CompiledFxGraph.post_compile (torch 2.11-2.15) on the
        host driver: with config.graph_partition, Inductor graphs only the partitions of GPU
        kernels, and a host-driver musa graph runs as CPU kernels (the kernel-device pass), so it
        would have none. A musa graph there is graphed whole (Inductor's path without partitions);
        any other graph, and musa graphs on the cuda driver, get torch's post_compile."""
        import torch_musa

        if "musa" in getattr(self, "device_types", ()) and torch_musa.get_driver_name() != "cuda":
            from torch._inductor import config

            with config.patch(graph_partition=False):
                return torch_fn(self, *args, **kwargs)
        return torch_fn(self, *args, **kwargs)

    return post_compile


def _gt_wrap_dynamo_reset(torch_fn):
    @_functools.wraps(torch_fn)
    def reset():
        """Adapts torch._dynamo.reset (torch 2.11-2.15), which frees torch.cuda's graph trees (when
        CUDA is available) but not musa's: it frees musa's too (nothing else changes)."""
        torch_fn()
        from torch_musa._inductor import graph_trees

        graph_trees.reset()

    return reset


def install_graph_trees() -> None:
    """Installs the graph-tree wrappers when Inductor's modules load."""
    from torch_musa._import_hooks import after_import

    after_import("torch._inductor.cudagraph_utils", lambda m: _wrap_once(
        _gt_originals, m, "torch._inductor.cudagraph_utils", "check_lowering_disable_cudagraph",
        _gt_wrap_check_lowering))
    after_import("torch._inductor.cudagraph_trees", lambda m: _wrap_once(
        _gt_originals, m, "torch._inductor.cudagraph_trees", "cudagraphify_impl", _gt_wrap_cudagraphify_impl))
    after_import("torch._dynamo", lambda m: _wrap_once(
        _gt_originals, m, "torch._dynamo", "reset", _gt_wrap_dynamo_reset))
    after_import("torch._inductor.output_code", lambda m: _wrap_once(
        _gt_originals, m.CompiledFxGraph, "CompiledFxGraph", "post_compile", _gt_wrap_post_compile))


# ============================================================================================
# END SECTION: graph trees
# ============================================================================================


# ============================================================================================
# BEGIN SECTION: kernel regions (a musa graph compiled as a CUDA graph on the cuda driver)
# ============================================================================================
_kr_originals: dict = {}


def _kr_wrap_init_wrapper_code(torch_fn):
    @_functools.wraps(torch_fn)
    def init_wrapper_code(self, *args, **kwargs):
        """Adapts torch._inductor.graph.GraphLowering.init_wrapper_code (torch 2.11-2.15), which
        asserts that a graph has one device type besides cpu ("Does not support mixing
        cuda+musa") and picks the wrapper by that type. A musa graph the kernel-device pass
        ran on has musa inputs and results around kernel-device nodes: its wrapper is musa's,
        which hands the results over as musa tensors and, for a graph made a CUDA graph (marked
        in its meta), whose device guards are kernel regions over musa's stream and memory.
        Any other graph gets torch's function with its device types as they are."""
        from torch_musa._inductor.kernel_device_pass import marks_kernel_regions, musa_results

        module = getattr(self, "module", None)
        drop = "cuda" if marks_kernel_regions(module) and "cuda" in self.device_types else None
        add = "musa" if musa_results(module) and "musa" not in self.device_types else None
        if drop is None and add is None:
            return torch_fn(self, *args, **kwargs)
        if drop:
            self.device_types.discard(drop)
        if add:
            self.device_types.add(add)
        try:
            return torch_fn(self, *args, **kwargs)
        finally:
            if drop:
                self.device_types.add(drop)
            if add:
                self.device_types.discard(add)

    return init_wrapper_code


def install_kernel_regions() -> None:
    """Installs the wrapper when Inductor's graph module loads."""
    from torch_musa._import_hooks import after_import

    after_import("torch._inductor.graph", lambda m: _wrap_once(
        _kr_originals, m.GraphLowering, "GraphLowering", "init_wrapper_code", _kr_wrap_init_wrapper_code))


# ============================================================================================
# END SECTION: kernel regions
# ============================================================================================


# ============================================================================================
# BEGIN SECTION: legacy names (Tensor.type("torch_musa.XTensor"), torch.set_autocast_enabled(bool))
# ============================================================================================
_ln_originals: dict = {}
_LN_PREFIX = "torch_musa."


def _ln_wrap_tensor_type(torch_fn):
    @_functools.wraps(torch_fn)
    def type(self, *args, **kwargs):
        """Adapts torch.Tensor.type (torch 2.11-2.15): torch parses type names by backend
        prefix ("torch.musa.FloatTensor"), and torch_musa programs also name the classes by
        the package ("torch_musa.FloatTensor", the same classes). Only such names are rewritten."""
        if args and isinstance(args[0], str) and args[0].startswith(_LN_PREFIX):
            args = ("torch.musa." + args[0][len(_LN_PREFIX):],) + args[1:]
        elif isinstance(kwargs.get("dtype"), str) and kwargs["dtype"].startswith(_LN_PREFIX):
            kwargs["dtype"] = "torch.musa." + kwargs["dtype"][len(_LN_PREFIX):]
        return torch_fn(self, *args, **kwargs)

    return type


def _ln_wrap_set_autocast_enabled(torch_fn):
    @_functools.wraps(torch_fn)
    def set_autocast_enabled(*args, **kwargs):
        """Adapts torch.set_autocast_enabled (torch 2.11-2.15): the legacy form without a device
        type sets CUDA's autocast; torch_musa programs call it for musa, the machine's GPU. It
        still sets CUDA's (torch's behaviour), and musa's with it. Calls naming a device are torch's."""
        torch_fn(*args, **kwargs)
        if len(args) + len(kwargs) == 1 and "device_type" not in kwargs:
            torch_fn("musa", *args, **kwargs)

    return set_autocast_enabled


def install_legacy_names() -> None:
    _wrap_once(_ln_originals, _torch.Tensor, "torch.Tensor", "type", _ln_wrap_tensor_type)
    _wrap_once(_ln_originals, _torch, "torch", "set_autocast_enabled", _ln_wrap_set_autocast_enabled)


# ============================================================================================
# END SECTION: legacy names
# ============================================================================================


def install() -> None:
    """Installs every section's wrappers; torch_musa calls this at import (each installer is
    idempotent and cheap: it wraps modules ``import torch`` has loaded, or hooks their import)."""
    install_data_parallel()
    install_flex_attention()
    install_profiler()
    install_distributed()
    install_graph_trees()
    install_kernel_regions()
    install_legacy_names()
