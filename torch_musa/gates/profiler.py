"""torch.profiler's evaluators (torch 2.11-2.14; 2.15 removed them): BasicEvaluation counts CUDA's
launches and kernels only, and MatMulDimInFP16Pattern takes every event named aten::mm/bmm/addmm
for a torch op. Profiles with musa device events get musa's launches and kernels counted, and
musa's host-driver device events (named by their aten op) do not match as torch ops."""
import functools

from .registry import gate

# The musa runtime's kernel launches (one per launch on a musa stream, both drivers). On the cuda
# driver the kernels are CUPTI's, linked to the kernel device's op inside the musa op: there CUPTI's
# own launch calls (one level below musa's) are the ones that pair with them.
_MUSA_LAUNCHES = ("musaLaunchKernel", "cudaLaunchKernel", "__cudaLaunchKernel", "cudaLaunchCooperativeKernel",
                  "cuLaunchKernel")


def _event_name(e) -> str:
    name = getattr(e, "name", e)
    return str(name() if callable(name) else name)


def _is_musa_profile(events) -> bool:
    from torch.autograd import DeviceType

    return any(e.device_type() == DeviceType.PrivateUse1 for e in events)


def _musa_queue_depth(self, events):
    """torch's BasicEvaluation.compute_queue_depth over musa's launches and kernels in place of
    CUDA's; the algorithm is torch's, unchanged."""
    from torch.autograd import DeviceType
    from torch.profiler._utils import EventKey, Interval, index_of_first_match

    def is_launch(e):
        return e.device_type() == DeviceType.CPU and _event_name(e).startswith(_MUSA_LAUNCHES)

    def is_kernel(e):
        kind = e.activity_type() if hasattr(e, "activity_type") else "kernel"
        return e.device_type() == DeviceType.PrivateUse1 and kind == "kernel" and \
            not any(p in _event_name(e).lower() for p in ("mem", "cpy", "alloc", "free"))

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
            self.metrics[EventKey(event)].queue_depth = depth
    return queue_depth_list


@gate("torch.profiler._utils", "BasicEvaluation.compute_queue_depth", "counts cudaLaunchKernel and CUDA kernels "
      "only; a profile with musa device events counts musa's (also as musa_events, torch_musa's cuda_events)",
      version_gate="profiler_anti_patterns_available")
def _wrap_compute_queue_depth(torch_fn):
    def compute_queue_depth(self):
        results = getattr(self.profile, "kineto_results", None)
        events = results.events() if results is not None else ()
        if not _is_musa_profile(events):
            self.musa_events = []  # as cuda_events is on a profile without CUDA's
            return torch_fn(self)
        return _musa_queue_depth(self, events)

    compute_queue_depth.__wrapped__ = torch_fn
    return compute_queue_depth


@gate("torch.profiler._pattern_matcher", "MatMulDimInFP16Pattern.match", "asserts every event named aten::mm/bmm/"
      "addmm is a torch op; musa's host-driver device events, named by their aten op, do not match",
      version_gate="profiler_anti_patterns_available")
def _wrap_fp16_dim_match(torch_fn):
    @functools.wraps(torch_fn)
    def match(self, event) -> bool:
        from torch._C._profiler import _EventType

        if event.tag == _EventType.Kineto and event.name.startswith("aten::"):
            return False
        return torch_fn(self, event)

    return match
