"""Inductor's graph lowering (torch 2.11-2.15): GraphLowering.init_wrapper_code asserts one device
type besides cpu ("Does not support mixing cuda+musa") and picks the wrapper by that type. A musa
graph the kernel-device pass ran on gets musa's wrapper; every other graph gets torch's."""
import functools

from .registry import gate


@gate("torch._inductor.graph", "GraphLowering.init_wrapper_code", "asserts one device type besides cpu and picks "
      "the wrapper by it; a musa graph the kernel-device pass ran on gets musa's wrapper (musa results; "
      "kernel regions for a CUDA-graphed one)")
def _wrap_init_wrapper_code(torch_fn):
    @functools.wraps(torch_fn)
    def init_wrapper_code(self, *args, **kwargs):
        # musa's wrapper hands the results over as musa tensors and, for a graph made a CUDA graph
        # (marked in its meta), makes its device guards kernel regions over musa's stream and memory.
        from .._inductor.kernel_device_pass import marks_kernel_regions, musa_results

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
