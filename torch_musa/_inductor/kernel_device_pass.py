"""Compile a musa graph as a graph of the kernel device (the host driver's CPU, the cuda
driver's CUDA GPU).

Inductor chooses its code generation by device type. musa memory is the kernel device's
memory (host memory on the host driver, CUDA memory on the cuda driver), so the fastest
correct code for a musa graph is exactly the code Inductor makes for the same graph on
kernel-device tensors: C++/OpenMP kernels for ``cpu``; on ``cuda`` Triton kernels with the
static launcher, extern matmuls on CUDA tensors with no per-op delegation, ``empty_strided_cuda``
buffers. This post-grad pass (Inductor's per-device custom pass) turns the graph into that graph:

* each musa input is viewed as a kernel-device tensor over the same memory
  (``torch_musa::to_kernel_device``: no copy);
* every musa device argument becomes the kernel device, and every value's metadata with it;
* each result that was musa becomes a musa tensor over the kernel-device result's
  memory (``torch_musa::from_kernel_device``: no copy; a result that views an
  input gets that input's own storage back), in the wrapper's return statement, so that
  Inductor sees the kernel device's own graph;
* writes into musa inputs (``copy_`` for optimizer steps, running stats) go
  straight into their memory (``torch_musa::copy_from_kernel_device_``);
* ops that draw random numbers from the default generator (``multinomial``, ``randperm``;
  Inductor's own ``rand``-likes read its seeds, which stay on musa too) run on musa, through
  the op layer: on the kernel device they would draw from the CPU's or CUDA's generator, and
  compiled code must follow ``torch.musa.manual_seed`` as eager does.
* fused attention through torch's "overrideable" backend runs on musa too, the same way: the
  kernel device has no kernel for that op. So does attention with dropout (its draws follow
  musa's generator), reading the region's buffers it borrows.

Everything between is Inductor's own pipeline for that device, untouched: fusion, kernels,
the FX graph and kernel caches. On the cuda driver the generated wrapper runs the graph's
device code inside kernel regions (``torch_musa._C._KernelRegion``, written by
:mod:`.backend` as the device guard): the current musa stream is CUDA's current stream there
and CUDA allocations come from musa memory, as for one delegated op. Graphs that need musa's
own paths keep them (:func:`gpu_skip_reason`): ``reduce-overhead`` (musa graph trees),
AOTInductor, collectives, ops with no CUDA kernel, and the memory-efficient kernel's attention
with dropout (forward and backward: its random state is a CPU tensor at run time).
"""
from __future__ import annotations

import functools
import hashlib
import logging
import operator
import os
from typing import Any, Optional

import torch
import torch.fx
from torch._inductor.custom_graph_pass import CustomGraphModulePass
from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager, unset_fake_temporarily
from torch.utils._pytree import tree_leaves, tree_map

from .. import _C
from .._core import device as _device

_log = logging.getLogger(__name__)
_MUSA = "musa"
_CPU = torch.device("cpu")
_ops = torch.ops.torch_musa
#: The GraphModule meta key that marks a musa graph compiled as a CUDA graph (read by the wrapper).
KERNEL_REGION_KEY = "torch_musa_kernel_region"
#: The GraphModule meta key listing the results the generated wrapper hands over as musa tensors.
MUSA_RESULTS_KEY = "torch_musa_musa_results"
#: ``TORCH_MUSA_INDUCTOR_KERNEL_DEVICE=0`` keeps the cuda driver's musa graphs on musa's own
#: Triton path (musa buffers, extern kernels through the op layer), for comparison.
_SWITCH = "TORCH_MUSA_INDUCTOR_KERNEL_DEVICE"


def on_gpu() -> bool:
    """Whether the kernel device is CUDA (the cuda driver)."""
    return _device.get_driver_name() == "cuda"


def marks_kernel_regions(module: Any) -> bool:
    """Whether ``module`` is a musa graph this pass made a CUDA graph (its code runs in kernel regions)."""
    return (getattr(module, "meta", None) or {}).get(KERNEL_REGION_KEY) == "cuda"


def kernel_device_of(device: torch.device) -> torch.device:
    """The kernel device that runs musa ``device``'s work: ``cpu``, or ``cuda:<ordinal>``."""
    if not on_gpu():
        return _CPU
    index = device.index if device.index is not None else _device.current_device()
    return torch.device("cuda", _C._driver_ordinal(index))


def _is_musa_tensor(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.device.type == _MUSA


def _alias(x: FakeTensor, device: torch.device) -> FakeTensor:
    """x's memory as a fake tensor of ``device``: x's own storage, sizes, strides and offset, as
    the boundary ops' results share their argument's memory, so Inductor's storage-based alias
    analysis (reinplacing, its fake-tensor update after this pass) sees an input's kernel-device
    view as that input's memory. Made directly, as the fake mode makes a view (a meta view under
    a FakeTensor), without its dispatch: through the mode each costs about 6x more host time, and
    the pass makes one per value of every graph."""
    with unset_fake_temporarily(), in_kernel_invocation_manager(x.fake_mode):
        meta = torch.ops.aten.alias.default(x)
    return FakeTensor(x.fake_mode, meta, torch.device(device))


def _over_same_memory(x: torch.Tensor, device) -> torch.Tensor:
    """A tensor of ``device`` with x's size, strides and offset into a storage as large as x's
    (x's own storage for a fake tensor)."""
    if isinstance(x, FakeTensor):
        return _alias(x, device)
    numel = x.untyped_storage().nbytes() // x.element_size()
    base = torch.empty(numel, dtype=x.dtype, device=device)
    return torch.ops.aten.as_strided.default(base, x.size(), x.stride(), x.storage_offset())


def _kernel_view(x: torch.Tensor) -> torch.Tensor:
    """x's kernel-device view (on fake tensors: its metadata)."""
    return _over_same_memory(x, kernel_device_of(x.device))


@torch.library.register_fake("torch_musa::to_kernel_device")
def _to_kernel_device_fake(x):
    return _kernel_view(x)


@torch.library.register_fake("torch_musa::from_kernel_device")
def _from_kernel_device_fake(x, device):
    return _over_same_memory(x, device)


@torch.library.register_fake("torch_musa::from_kernel_device.index")
def _from_kernel_device_index_fake(x, index):
    return _over_same_memory(x, torch.device(_MUSA, index))


@torch.library.register_fake("torch_musa::borrow_from_kernel_device")
def _borrow_from_kernel_device_fake(x, index):
    return _over_same_memory(x, torch.device(_MUSA, index))


@torch.library.register_fake("torch_musa::copy_from_kernel_device_")
def _copy_from_kernel_device_fake(x, src):
    return None


def _kernel_device_arg(a: Any) -> Any:
    if isinstance(a, torch.device) and a.type == _MUSA:
        return kernel_device_of(a)
    return a


#: Fused attention through torch's "overrideable" backend (flash attention on the cuda driver,
#: ``backend/ops/attention.cpp``): the kernel device has no kernel for it, so it runs on musa
#: through the op layer, as random draws do.
_OVERRIDEABLE_ATTENTION = (torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default,
                           torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward.default)
_FLASH_ATTENTION = torch.ops.aten._scaled_dot_product_flash_attention.default
#: Attention whose dropout runs on musa inside a CUDA graph with eager's results (H100, 2026-12-05,
#: forward and backward, once the region lent its buffers to musa ops by borrowing them). The
#: memory-efficient kernel is not among them: its random state is a CPU tensor at run time where
#: fake tensors say musa, so its graphs keep musa's path.
_DROPOUT_IN_CUDA_GRAPHS = _OVERRIDEABLE_ATTENTION + (
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default)

#: Inductor's seeds come from the musa generator (torch.musa.manual_seed governs compiled
#: dropout, as torch.cuda's does).
_INDUCTOR_SEEDS = torch.ops.prims.inductor_seeds.default
_COLLECTIVE_NAMESPACES = ("_c10d_functional", "c10d_functional", "_c10d_functional_autograd", "_dtensor")


def gpu_skip_reason(gm: torch.fx.GraphModule) -> Optional[str]:
    """Why a musa graph on the cuda driver keeps musa's own Triton path, or None."""
    from torch._inductor import config
    from torch._inductor.virtualized import V

    if os.environ.get(_SWITCH, "1") == "0":
        return f"{_SWITCH}=0"
    if config.triton.cudagraphs:
        return "reduce-overhead: musa graph trees replay the graph"
    if V.aot_compilation or config.cpp_wrapper:
        return "AOTInductor / cpp_wrapper: musa's AOT wrapper"
    devices = set(_devices_in(gm))
    if any(d.type == "cuda" for d in devices):
        return "the graph has torch.cuda tensors of its own"
    indices = {d.index for d in devices if d.type == _MUSA}
    if len(indices) > 1:
        return "more than one musa device"
    for index in indices:
        if index is not None and _C._driver_ordinal(index) != index:
            return "the musa device is not the CUDA device of the same index"
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op != "call_function":
                continue
            custom = node.meta.get("custom")
            if isinstance(custom, dict) and "stream" in custom:
                return "user streams in the graph"
            target = node.target
            if not isinstance(target, torch._ops.OpOverload):
                continue
            if target.namespace in _COLLECTIVE_NAMESPACES:
                return f"collective {target}: mccl serves musa tensors"
            if _attention_with_dropout(node) and target not in _DROPOUT_IN_CUDA_GRAPHS:
                # Forward and backward: the random state the forward returns (philox seed and
                # offset) is a CPU tensor at run time where fake tensors say musa. On musa's
                # path, where both graphs keep every tensor musa, results equal eager's.
                return f"attention with dropout {target}: its random state crosses graphs"
            if stays_on_musa(node):
                continue  # runs on musa (the pass's step 3)
            if target.namespace not in ("prims", "torch_musa") and not _runs_on_cuda(target.name()):
                return f"{target} has no CUDA kernel (musa runs it through the op layer)"
    return None


def stays_on_musa(node: torch.fx.Node) -> bool:
    """Whether ``node`` runs on musa inside a kernel-device graph (the pass's step 3): Inductor's
    seeds and other random draws (musa's generator), and the overrideable attention op (no
    kernel-device kernel)."""
    return node.target is _INDUCTOR_SEEDS or node.target in _OVERRIDEABLE_ATTENTION or draws_random_numbers(node)


def draws_random_numbers(node: torch.fx.Node) -> bool:
    """Whether ``node`` draws from its device's default generator: a seeded op, unless it is
    attention with a constant ``dropout_p`` of 0 (tagged seeded, it draws nothing then: the
    op layer's eager rule too)."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or torch.Tag.nondeterministic_seeded not in target.tags:
        return False
    return _dropout_arg_index(target) is None or _attention_with_dropout(node)


def _attention_with_dropout(node: torch.fx.Node) -> bool:
    """Whether ``node`` is attention (forward or backward) whose ``dropout_p`` is not a constant 0."""
    target = node.target
    i = _dropout_arg_index(target) if isinstance(target, torch._ops.OpOverload) else None
    if i is None:
        return False
    p = node.args[i] if i < len(node.args) else node.kwargs.get("dropout_p", target._schema.arguments[i].default_value)
    return not (isinstance(p, (int, float)) and p == 0)


def _dropout_arg_index(target: torch._ops.OpOverload) -> Optional[int]:
    return next((i for i, arg in enumerate(target._schema.arguments) if arg.name == "dropout_p"), None)


@functools.lru_cache(None)
def _runs_on_cuda(name: str) -> bool:
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
               for key in ("CUDA", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
                           "CompositeImplicitAutograd"))


def _flash_for_aot(graph: torch.fx.Graph, fake_mode) -> None:
    """AOTInductor's model is a CUDA model, whose C shims have no kernel for the overrideable
    attention op: there it calls CUDA's flash attention itself (inference graphs, whose random
    state nobody reads; the mask was None, or the choice would not have been flash)."""
    from torch._inductor import config
    from torch._inductor.virtualized import V

    if not (V.aot_compilation or config.cpp_wrapper):
        return
    for node in graph.find_nodes(op="call_function", target=_OVERRIDEABLE_ATTENTION[0]):
        args = dict(zip((a.name for a in node.target._schema.arguments), node.args), **node.kwargs)
        if args.get("attn_bias") is not None or any(u.args[1] in (6, 7) for u in node.users):
            continue
        flash_args = (args["query"], args["key"], args["value"], args.get("dropout_p", 0.0),
                      args.get("is_causal", False), args.get("return_debug_mask", False))
        with graph.inserting_before(node):
            flash = graph.call_function(_FLASH_ATTENTION, flash_args, {"scale": args.get("scale")})
        vals = tree_map(lambda a: a.meta.get("val") if isinstance(a, torch.fx.Node) else a, flash_args)
        with fake_mode:
            flash.meta["val"] = _FLASH_ATTENTION(*vals, scale=args.get("scale"))
        node.replace_all_uses_with(flash)
        graph.erase_node(node)


def _devices_in(gm: torch.fx.GraphModule):
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        for v in (val if isinstance(val, (list, tuple)) else (val,)):
            if isinstance(v, torch.Tensor):
                yield v.device


class KernelDevicePass(CustomGraphModulePass):
    """Rewrites a post-grad musa graph to run on the kernel device (CPU, or CUDA)."""

    def __call__(self, gm: torch.fx.GraphModule) -> None:
        graph = gm.graph
        fake_mode = _fake_mode_of(graph)
        if fake_mode is None:  # no tensors at all: nothing to move
            return
        from torch._dynamo.utils import counters

        gpu = on_gpu()
        if gpu:
            _flash_for_aot(graph, fake_mode)
            reason = gpu_skip_reason(gm)
            if reason is not None:
                _log.debug("a musa graph keeps musa's Triton path: %s", reason)
                counters["torch_musa"][f"musa path: {reason}"] += 1
                return
            gm.meta[KERNEL_REGION_KEY] = "cuda"
        counters["torch_musa"]["kernel-device graphs"] += 1

        def kd_fake(v: Any) -> Any:
            if not _is_musa_tensor(v):
                return v
            if isinstance(v, FakeTensor):
                return _alias(v, kernel_device_of(v.device))
            with fake_mode:
                return torch.empty_strided(v.size(), v.stride(), dtype=v.dtype, device=kernel_device_of(v.device))

        output = graph.find_nodes(op="output")[0]
        placeholders = list(graph.find_nodes(op="placeholder"))
        last_input = placeholders[-1] if placeholders else None
        originals = {n: n.meta.get("val") for n in graph.nodes}

        # 1. Inputs: one kernel-device view each, used by everything but the graph's outputs
        #    and the writes back into them. Constants (real tensors the graph module holds) are
        #    replaced by their kernel-device views outright.
        sources = [n for n in placeholders if _is_musa_tensor(n.meta.get("val"))]
        for src in sources:
            with graph.inserting_after(last_input):
                view = graph.call_function(_ops.to_kernel_device.default, (src,))
            with fake_mode:
                view.meta["val"] = _kernel_view(src.meta["val"])
            for user in list(src.users):
                if user is view or user is output or _writes_into(user, src):
                    continue
                user.replace_input_with(src, view)
        constant_devices = {}
        for node in graph.find_nodes(op="get_attr"):
            value = _attr(gm, node.target)
            if _is_musa_tensor(value):
                constant_devices[node] = value.device
                with unset_fake_temporarily():
                    _set_attr(gm, node.target, _ops.to_kernel_device.default(value))
                if "val" in node.meta:
                    node.meta["val"] = tree_map(kd_fake, node.meta["val"])

        # 2. Writes into musa inputs go straight into their memory.
        for node in list(graph.nodes):
            if node.op == "call_function" and node.target is torch.ops.aten.copy_.default \
                    and _is_musa_tensor(originals.get(node.args[0])) and node.args[0] in sources:
                dst, src = node.args[0], node.args[1]
                with graph.inserting_before(node):
                    write = graph.call_function(_ops.copy_from_kernel_device_.default, (dst, src))
                write.meta["val"] = None
                node.replace_all_uses_with(dst)
                graph.erase_node(node)

        # 3. Everything else computes on the kernel device, inside subgraphs (control flow,
        #    stream regions) too: their inputs now come from kernel-device values. What stays
        #    on musa (random draws) takes musa tensors over its inputs' memory and hands its
        #    results over through views.
        boundary = (_ops.to_kernel_device.default, _ops.copy_from_kernel_device_.default)
        on_musa = set()  # nodes whose values stay musa tensors
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target in boundary or node in on_musa:
                continue
            if stays_on_musa(node):
                _musa_args(graph, node, originals)
                on_musa.update(_view_on_kernel_device(graph, node, output, fake_mode))
            else:
                _move_node_to_kernel_device(node, kd_fake)
        for name, sub in gm.named_modules():
            if name and isinstance(sub, torch.fx.GraphModule):
                _strip_boundary(sub.graph)
                for node in sub.graph.nodes:
                    if node.op in ("placeholder", "call_function"):
                        _move_node_to_kernel_device(node, kd_fake)
                sub.recompile()
        if not gpu:
            # flex_attention that Inductor's CPU template refuses (training) runs torch's dense
            # implementation, traced into this CPU graph; its results stand for the op's.
            from .flex_dense import decompose_where_needed

            for old, new in decompose_where_needed(gm, fake_mode).items():
                originals[new] = originals.get(old)

        # 4. Results that were musa go back as musa tensors over the same memory.
        def musa_device_of(a: Any) -> Optional[torch.device]:
            if not isinstance(a, torch.fx.Node) or a.op == "placeholder" or a in on_musa:
                return None
            was = originals.get(a)
            device = constant_devices.get(a) if a.op == "get_attr" else getattr(was, "device", None)
            return device if device is not None and device.type == _MUSA else None

        results = output.args[0] if len(output.args) == 1 else None
        _complex_results_in_kernel_device_layout(graph, output, results, fake_mode, on_musa)
        if _returns_through_wrapper(results):
            # The graph returns the kernel-device values themselves, as the kernel device's own
            # graph does, and the wrapper hands them over (MUSA_RESULTS_KEY). Inductor stores a
            # value the graph returns once, where its other readers load it; a hand-over op in
            # the graph would leave the value inlined there and computed again for the op.
            gm.meta[MUSA_RESULTS_KEY] = tuple((i, d.index) for i, d in enumerate(map(musa_device_of, results))
                                              if d is not None)
        else:
            def back_to_musa(a: Any) -> Any:
                device = musa_device_of(a)
                if device is None:
                    return a
                with graph.inserting_before(output):
                    musa = graph.call_function(*_from_kernel_device_call(a, device))
                if originals.get(a) is not None:
                    musa.meta["val"] = originals[a]
                return musa

            output.args = tree_map(back_to_musa, output.args)
        graph.lint()
        gm.recompile()

    def uuid(self) -> Optional[Any]:
        # Inductor's FX graph cache keys on this: what the pass makes of a graph depends on the
        # driver, the switch and the musa-to-CUDA device map, and the code made from it on this
        # package's sources.
        return _package_digest(f"{on_gpu()}:{os.environ.get(_SWITCH, '1')}:{_device_map()}")


def _device_map() -> tuple:
    """The CUDA ordinal of each musa device (compiled code names devices by index)."""
    if not on_gpu():
        return ()
    return tuple(_C._driver_ordinal(i) for i in range(_device.device_count()))


@functools.lru_cache(None)
def _package_digest(setting: str) -> str:
    digest = hashlib.sha256(setting.encode())
    package = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(package)):
        if name.endswith(".py"):
            with open(os.path.join(package, name), "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def _strip_boundary(graph: torch.fx.Graph) -> None:
    """Undoes this pass's edges in a subgraph it ran on first (Inductor passes subgraphs
    before their parent): once the parent runs on CPU, the subgraph's inputs already are."""
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in (_ops.to_kernel_device.default, _ops.from_kernel_device.default,
                           _ops.from_kernel_device.index, _ops.borrow_from_kernel_device.default):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif node.target is _ops.copy_from_kernel_device_.default:
            with graph.inserting_before(node):
                graph.call_function(torch.ops.aten.copy_.default, node.args)
            graph.erase_node(node)


def _returns_through_wrapper(results: Any) -> bool:
    """Whether the wrapper hands the graph's results over (Inductor's Python wrapper, a flat
    list of results), rather than ``from_kernel_device`` nodes in the graph (AOTInductor and
    the C++ wrapper: their code for a graph's return is C++)."""
    from torch._inductor import config
    from torch._inductor.virtualized import V

    if V.aot_compilation or config.cpp_wrapper or not isinstance(results, (tuple, list)):
        return False
    return all(r is None or isinstance(r, torch.fx.Node) for r in results)


def musa_results(module: Any) -> tuple:
    """(result index, musa device index) of each result the wrapper of ``module`` (a graph this
    pass ran on) hands over as a musa tensor."""
    return (getattr(module, "meta", None) or {}).get(MUSA_RESULTS_KEY, ())


def _from_kernel_device_call(value: torch.fx.Node, device: torch.device):
    from torch._inductor import config
    from torch._inductor.virtualized import V

    # AOTInductor calls the op through its proxy executor, which passes the model's own
    # (kernel) device for any Device argument, and the C++ wrapper cannot pass a Device
    # at all: there the musa device goes by index.
    if V.aot_compilation or config.cpp_wrapper:
        return _ops.from_kernel_device.index, (value, device.index)
    return _ops.from_kernel_device.default, (value, device)


def _move_node_to_kernel_device(node: torch.fx.Node, kd_fake) -> None:
    # The host driver runs work inline in program order, so a CPU kernel's stream does not
    # matter (and Inductor only declares user streams for GPU graphs); the graph's own
    # stream ops (waits, event records) stay and still run. (The cuda driver leaves graphs
    # with user streams on musa's path.)
    custom = node.meta.get("custom")
    if isinstance(custom, dict) and "stream" in custom:
        node.meta["custom"] = {k: v for k, v in custom.items() if k != "stream"}
    # Most nodes name no device: their arguments stay (assigning them re-links the node's inputs).
    if _names_musa_device(node.args):
        node.args = tree_map(_kernel_device_arg, node.args)
    if _names_musa_device(node.kwargs):
        node.kwargs = tree_map(_kernel_device_arg, node.kwargs)
    if "val" in node.meta:
        val = node.meta["val"]
        node.meta["val"] = kd_fake(val) if isinstance(val, torch.Tensor) else tree_map(kd_fake, val)


def _names_musa_device(a: Any) -> bool:
    """Whether a node's arguments hold a musa device (walked as tree_map walks them to rewrite it)."""
    return any(isinstance(x, torch.device) and x.type == _MUSA for x in tree_leaves(a))


def _complex_results_in_kernel_device_layout(graph: torch.fx.Graph, output: torch.fx.Node, results: Any,
                                             fake_mode, on_musa: set) -> None:
    """Gives complex values of kernel-device ops the strides those ops have on the kernel
    device, as eager musa's results have.

    Some meta functions choose strides by device (``linalg_eig``'s vectors are row-major on
    ``cuda``, the FFTs' layouts follow cuFFT there), and Dynamo traced the musa graph with
    the other choice. Inductor makes a graph's result match its traced strides
    (``original_output_strides``) with a copy kernel, and its GPU code generation has no
    complex types (``KeyError: 'complex64'``). So each complex value is computed again on
    the kernel device's fake tensors, in graph order (a view such as ``conj`` of an FFT
    then gets the FFT's new layout), and the results' recorded strides follow. Real values
    keep their traced strides: the copy is cheap there, and a backward graph reading them
    expects those strides."""
    def val(a: Any) -> Any:
        return a.meta.get("val") if isinstance(a, torch.fx.Node) else a

    def has_complex(v: Any) -> bool:
        return any(isinstance(t, torch.Tensor) and t.is_complex() for t in tree_leaves(v))

    def same_kind(old: Any, new: Any) -> bool:
        if isinstance(old, torch.Tensor):
            return isinstance(new, torch.Tensor) and new.shape == old.shape and new.dtype == old.dtype
        if isinstance(old, (list, tuple)):
            return isinstance(new, (list, tuple)) and len(new) == len(old) and all(map(same_kind, old, new))
        return True

    changed = False
    for node in graph.nodes:
        if node.op != "call_function" or node in on_musa or not has_complex(node.meta.get("val")):
            continue
        if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
            parent = node.args[0].meta.get("val")
            if isinstance(parent, (list, tuple)) and same_kind(node.meta["val"], parent[node.args[1]]):
                node.meta["val"] = parent[node.args[1]]
            continue
        if not isinstance(node.target, torch._ops.OpOverload):
            continue
        try:
            with fake_mode:
                value = node.target(*tree_map(val, node.args), **tree_map(val, node.kwargs))
        except Exception as e:  # no fake kernel on the kernel device: keep the traced layout
            _log.debug("kept the traced layout of %s: %s", node, e)
            continue
        if same_kind(node.meta["val"], value):
            node.meta["val"] = value
            changed = True
    strides = output.meta.get("original_output_strides")
    if changed and strides is not None:
        # Inductor matches each user-visible result to these, recorded before the pass.
        for i, result in enumerate(results if isinstance(results, (tuple, list)) else (results,)):
            v = val(result)
            if i < len(strides) and strides[i] is not None and isinstance(v, torch.Tensor) and v.is_complex():
                strides[i] = v.stride()


def _musa_args(graph: torch.fx.Graph, node: torch.fx.Node, originals: dict) -> None:
    """Gives ``node`` musa tensors for the musa values it reads: a graph input itself, any
    other value as a musa tensor over its kernel-device memory, which holds that memory (the
    graph may read the value again after ``node``)."""
    made = {}

    def musa(a: Any) -> Any:
        if not isinstance(a, torch.fx.Node):
            return a
        if a.op == "call_function" and a.target is _ops.to_kernel_device.default:
            return a.args[0]  # an input's view, or a musa result's: that musa value
        if not _is_musa_tensor(originals.get(a)):
            return a
        if a not in made:
            with graph.inserting_before(node):
                made[a] = graph.call_function(_ops.borrow_from_kernel_device.default, (a, originals[a].device.index))
            made[a].meta["val"] = originals[a]
        return made[a]

    node.args = tree_map(musa, node.args)
    node.kwargs = tree_map(musa, node.kwargs)


def _view_on_kernel_device(graph: torch.fx.Graph, node: torch.fx.Node, output: torch.fx.Node,
                           fake_mode) -> list:
    """Leaves ``node`` on musa; its users read kernel-device views of its musa results (of
    each ``getitem`` of a tuple result), the graph's outputs the musa results themselves.
    Returns the nodes whose values stay musa."""
    val = node.meta.get("val")
    if isinstance(val, (list, tuple)):
        items = [u for u in node.users if u.op == "call_function" and u.target is operator.getitem]
    else:
        items = [node]
    for item in items:
        if not _is_musa_tensor(item.meta.get("val")):
            continue
        with graph.inserting_after(item):
            view = graph.call_function(_ops.to_kernel_device.default, (item,))
        with fake_mode:
            view.meta["val"] = _kernel_view(item.meta["val"])
        item.replace_all_uses_with(view, delete_user_cb=lambda user: user is not view and user is not output)
    return [node] + items


def _attr(gm: torch.fx.GraphModule, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
    return obj


def _set_attr(gm: torch.fx.GraphModule, target: str, value: torch.Tensor) -> None:
    prefix, _, name = target.rpartition(".")
    owner = gm.get_submodule(prefix) if prefix else gm
    if name in owner._parameters:
        owner._parameters[name] = torch.nn.Parameter(value, requires_grad=False)
    elif name in owner._buffers:
        owner._buffers[name] = value
    else:
        setattr(owner, name, value)


def _writes_into(node: torch.fx.Node, target: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target is torch.ops.aten.copy_.default and node.args[0] is target


def _fake_mode_of(graph: torch.fx.Graph):
    from torch._guards import detect_fake_mode

    vals = [n.meta.get("val") for n in graph.nodes]
    return detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)])
