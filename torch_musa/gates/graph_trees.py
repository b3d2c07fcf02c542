"""Inductor's CUDA graph trees (torch.compile mode="reduce-overhead" / "max-autotune", torch
2.11-2.15): torch graphs only graphs of one cuda device and builds torch.cuda's trees. A graph of
one musa device is graphed through MUSA Graph, on torch's trees run over musa
(torch_musa/_inductor/graph_trees.py); every other graph gets torch's path."""
import functools

from . import _args
from .registry import gate


def _only_musa(device_node_mapping) -> bool:
    """Whether a graph's devices are one musa device (and its kernel device)."""
    from torch._inductor import config

    # The kernel device's nodes compute over musa memory (the kernel-device pass: cpu on the host
    # driver, cuda on the cuda driver). Other cpu nodes run outside the graphed partitions when
    # there are partitions, as for cuda.
    ignored = {"meta", "cuda" if _args.on_cuda_driver() else "cpu"}
    if getattr(config, "graph_partition", False) and config.triton.cudagraphs:
        ignored.add("cpu")
    if not any(d.type == "musa" for d in device_node_mapping):
        return False
    devices = [d for d in device_node_mapping if d.type not in ignored]
    return all(d.type == "musa" for d in devices) and len({d.index for d in devices}) == 1


@gate("torch._inductor.cudagraph_utils", "check_lowering_disable_cudagraph", "accepts only graphs of one cuda "
      "device (\"skipping cudagraphs due to multiple devices: musa:0\"); a graph of one musa device is graphed")
def _wrap_check_lowering(torch_fn):
    @functools.wraps(torch_fn)
    def check_lowering_disable_cudagraph(device_node_mapping):
        # torch's checks on torch.cuda's allocator do not concern musa memory
        if _only_musa(device_node_mapping):
            return None
        return torch_fn(device_node_mapping)

    return check_lowering_disable_cudagraph


@gate("torch._inductor.cudagraph_trees", "cudagraphify_impl", "builds torch.cuda's graph trees; a graph with musa "
      "inputs gets the same trees run over MUSA Graph")
def _wrap_cudagraphify_impl(torch_fn):
    @functools.wraps(torch_fn)
    def cudagraphify_impl(model, inputs, static_input_idxs, *args, **kwargs):
        from .._inductor import graph_trees

        if graph_trees.has_musa_tensor(inputs):
            return graph_trees.cudagraphify_impl(model, inputs, static_input_idxs, *args, **kwargs)
        return torch_fn(model, inputs, static_input_idxs, *args, **kwargs)

    return cudagraphify_impl


@gate("torch._inductor.output_code", "CompiledFxGraph.post_compile", "with graph_partition, graphs only GPU-kernel "
      "partitions; on the host driver (CPU kernels over musa memory) a musa graph is graphed whole")
def _wrap_post_compile(torch_fn):
    @functools.wraps(torch_fn)
    def post_compile(self, *args, **kwargs):
        if "musa" in getattr(self, "device_types", ()) and not _args.on_cuda_driver():
            from torch._inductor import config

            with config.patch(graph_partition=False):
                return torch_fn(self, *args, **kwargs)
        return torch_fn(self, *args, **kwargs)

    return post_compile


@gate("torch._dynamo", "reset", "frees torch.cuda's graph trees only; it frees musa's too")
def _wrap_dynamo_reset(torch_fn):
    @functools.wraps(torch_fn)
    def reset():
        torch_fn()
        from .._inductor import graph_trees

        graph_trees.reset()

    return reset
