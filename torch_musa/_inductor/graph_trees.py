"""``torch.compile(mode="reduce-overhead")`` on musa: Inductor's own graph trees over MUSA Graph.

Inductor's CUDA graph trees (``torch/_inductor/cudagraph_trees.py``: one memory pool per device
shared by every graph of the trees, warm-up runs, re-recording on new shapes,
``torch.compiler.cudagraph_mark_step_begin()``, the "pending backward" and "overwritten output"
errors) talk to the device only through ``torch.cuda.*`` and ``torch._C._cuda_*`` names, looked up
on the module's global ``torch`` when they run. So rather than a second implementation, musa
runs a second *instance* of torch's module (loaded from torch's own file) whose global ``torch``
answers those names with musa's: ``torch.cuda.CUDAGraph`` is ``torch.musa.MUSAGraph``, the
allocator hooks are the musa caching allocator's (``torch_musa._C._graph_tree_*``). Everything
else is torch's. ``torch.cuda``'s own trees are untouched (another module, another tree).

The allocator checkpoint differs in mechanism, not in effect: torch's allocator snapshots the
pool after each recording and restores it before recording again from a replayed state. Here
the pool is made consistent directly: every output the trees still hold alive (replays make
them without the allocator) becomes an allocation of the pool again at its own address
(``_graph_tree_claim_storages``); everything else in the pool is free, which is exactly what
the restored checkpoint would say.

Host driver: a MUSA Graph capture there records musa ops as tasks, but Inductor's host code is
CPU kernels over musa memory (the kernel-device pass), which a capture does not see. So the
capture records the compiled call itself as one host task (:class:`HostCapture`): at every
replay it runs the compiled code on the graph's static inputs and writes the results into the
outputs the capture allocated in the pool (one copy per output). Same memory, same tree
semantics, no speed gain (there is none to get on the host).
"""
from __future__ import annotations

import contextlib
import importlib.util
import re
import sys
import types
from typing import Any

import torch

from .. import _C as _musa_C, graphs, memory, streams
from .._core import device as _musa_device

_NAME = "torch_musa._inductor._musa_cudagraph_trees"
_module = None


def _C():
    return _musa_C


class _CudaAsMusa(types.SimpleNamespace):
    """``torch.cuda`` as graph trees use it, answered by ``torch.musa``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.get_device_module("musa"), name)  # torch.musa, as registered


class _CAsMusa(types.SimpleNamespace):
    """``torch._C`` for graph trees: the ``_cuda_*`` and storage hooks are musa's."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("_cuda_", "_cudnn_")):
            raise NotImplementedError(
                f"torch {torch.__version__}'s graph trees call torch._C.{name}, which torch_musa's graph trees "
                "do not provide for musa yet (torch_musa/_inductor/graph_trees.py); compile without "
                'mode="reduce-overhead" (or with torch._inductor.config.triton.cudagraphs=False) meanwhile')
        return getattr(torch._C, name)


class _TorchAsMusa(types.SimpleNamespace):
    """The graph-tree module's global ``torch``: torch, with ``cuda`` and ``_C`` redirected."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


def _device(*args, **kwargs):
    # Graph trees pass device indices (torch.device(0)); those are musa devices here.
    if len(args) == 1 and not kwargs and isinstance(args[0], int):
        return torch.device("musa", args[0])
    return torch.device(*args, **kwargs)


def _noop(*args, **kwargs) -> None:
    return None


def _check_pool_live_allocations(device, pool, live_storage_ptrs) -> bool:
    # Only the slow-path asserts call it: the live blocks of the pool are the storages given.
    live = {b["address"] for s in memory.memory_snapshot(tuple(pool)) for b in s["blocks"]
            if b["state"] == "active_allocated"}
    return live == set(live_storage_ptrs)


def _set_checkpoint_pool_state(device, state, stale_storages, live_storages) -> None:
    # state is _get_checkpoint_state's (device, pool): see the module's docstring.
    _, pool = state
    _C()._graph_tree_claim_storages(device, pool, list(live_storages))


def _tensor_from_storage(metadata: dict, storage) -> torch.Tensor:
    t = torch.empty(0, dtype=metadata["dtype"], device=metadata["device"])
    return t.set_(storage, metadata["storage_offset"], metadata["size"], metadata["stride"])


def _data_ptrs_equal(tensors, data_ptrs, indices) -> bool:
    return all(tensors[i].data_ptr() == data_ptrs[i] for i in indices)


_TLS_PREFIX = "musa_"


def _tls_key(key: str) -> str:
    # Not torch.cuda's trees' thread-local slots. The module's source names musa's keys already
    # (tree_module), and its functions also stash through this namespace: prefixed once.
    return key if key.startswith(_TLS_PREFIX) else _TLS_PREFIX + key


def _kernel_device_hook(name: str, host_answer):
    """On the cuda driver, musa ops run CUDA's cuBLAS / cuDNN, whose workspaces (allocated during
    musa ops: in musa memory, in the trees' pool while they record) torch's hooks manage; on the
    host driver there are none."""
    if _musa_device.get_driver_name() == "cuda" and hasattr(torch._C, name):
        return getattr(torch._C, name)
    return host_answer


def _musa_namespaces():
    # torch.musa.graph_pool_handle: the trees' manager captures an empty graph into it at once,
    # which makes the pool (warm-up runs allocate into it) and keeps it as long as the manager.
    cuda = _CudaAsMusa(CUDAGraph=graphs.MUSAGraph)
    c = _CAsMusa(
        _cuda_clearCublasWorkspaces=_kernel_device_hook("_cuda_clearCublasWorkspaces", _noop),
        _cuda_get_conv_benchmark_empty_cache=_kernel_device_hook("_cuda_get_conv_benchmark_empty_cache",
                                                                 lambda: False),
        _cudnn_set_conv_benchmark_empty_cache=_kernel_device_hook("_cudnn_set_conv_benchmark_empty_cache", _noop),
        _cuda_isHistoryEnabled=lambda: False,
        _cuda_beginAllocateCurrentThreadToPool=lambda d, pool: _C()._mempool_begin(d, tuple(pool)),
        _cuda_endAllocateToPool=lambda d, pool: _C()._mempool_end(d, tuple(pool)),
        _cuda_releasePool=lambda d, pool: _C()._mempool_release(d, tuple(pool)),
        _cuda_getCheckpointState=lambda d, pool: (d, tuple(pool)),
        _cuda_setCheckpointPoolState=_set_checkpoint_pool_state,
        # The memory of outputs dead since the last invocation is free in the pool already.
        _cuda_cudaCachingAllocator_raw_delete=_noop,
        _cuda_checkPoolLiveAllocations=_check_pool_live_allocations,
        _construct_CUDA_Tensor_From_Storage_And_Metadata=_tensor_from_storage,
        _tensors_data_ptrs_at_indices_equal=_data_ptrs_equal,
        _set_storage_access_error_msg=lambda t, msg: _C()._graph_tree_tensor_error(t, msg),
        _set_storage_data_ptr_access_error_msg=lambda s, msg: _C()._graph_tree_storage_error(s, msg),
        _free_And_Remove_DeleterFn=lambda s: _C()._graph_tree_free_and_disown(s),
        _has_Standard_Deleter=lambda s: _C()._graph_tree_owns(s),
        _stash_obj_in_tls=lambda key, obj: torch._C._stash_obj_in_tls(_tls_key(key), obj),
        _is_key_in_tls=lambda key: torch._C._is_key_in_tls(_tls_key(key)),
        _get_obj_in_tls=lambda key: torch._C._get_obj_in_tls(_tls_key(key)),
    )
    return _TorchAsMusa(cuda=cuda, _C=c, device=_device)


def tree_module() -> types.ModuleType:
    """The musa instance of torch's graph-tree module (loaded on first use)."""
    global _module
    if _module is None:
        import torch._inductor.cudagraph_trees as cuda_trees

        spec = importlib.util.spec_from_file_location(_NAME, cuda_trees.__file__)
        module = importlib.util.module_from_spec(spec)
        module.__package__ = "torch._inductor"  # its relative imports are torch's
        module.__spec__ = None  # (so that importlib does not warn that they differ)
        with open(cuda_trees.__file__, encoding="utf-8") as f:
            # Tensor.is_cuda (the one device question not asked through the module's torch).
            source = re.sub(r"\.is_cuda\b", ".is_musa", f.read())
        # The module stashes its thread-local slots (autograd's threads inherit them) when it
        # runs, before its torch is musa's: under musa's keys, never over torch.cuda's trees'
        # (replacing a stashed slot dropped a reference its owner still used on torch 2.11,
        # and the process crashed).
        source, stashes = re.subn(r"""(_stash_obj_in_tls\(\s*["'])""", r"\g<1>" + _TLS_PREFIX, source)
        if not stashes:
            raise RuntimeError("torch_musa: this torch's torch/_inductor/cudagraph_trees.py stashes its thread-local "
                               "slots in a way torch_musa does not know, so musa's graph trees cannot keep apart from "
                               "torch.cuda's; use mode='default' (no graph trees) with this torch, or a supported one "
                               "(2.11-2.15)")
        sys.modules[_NAME] = module
        exec(compile(source, cuda_trees.__file__, "exec"), module.__dict__)
        module.torch = _musa_namespaces()
        # torch.compiler.cudagraph_mark_step_begin() marks steps for every device's trees.
        module.MarkStepBox = cuda_trees.MarkStepBox
        # torch.cond as CUDA conditional graph nodes (torch.cuda only): MUSA Graph has none.
        module.ControlFlowOpWarmupDispatchMode = contextlib.nullcontext
        module.CUDAGraphCaptureControlFlowOpDispatchMode = contextlib.nullcontext
        _module = module
    return _module


def has_musa_tensor(values) -> bool:
    return any(isinstance(v, torch.Tensor) and v.device.type == "musa" for v in values)


def cudagraphify_impl(model, inputs, static_input_idxs, *args, **kwargs):
    """Inductor's ``cudagraph_trees.cudagraphify_impl`` for a graph of musa inputs."""
    if _musa_device.get_driver_name() != "cuda":
        model = HostCapture(model, kwargs.get("mutated_input_idxs", ()))
    return tree_module().cudagraphify_impl(model, inputs, static_input_idxs, *args, **kwargs)


def reset() -> None:
    """Frees the musa graph trees (``torch._dynamo.reset()`` frees torch.cuda's only)."""
    if _module is not None:
        # Cached tensors are switched on and off process-wide, and torch.cuda's reset (run just
        # before, by torch._dynamo.reset) switches them off even when only musa's trees hold some.
        torch._C._set_cached_tensors_enabled(True)
        _module.reset_cudagraph_trees()


def _view(storage, like: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=like.dtype, device=like.device).set_(
        storage, like.storage_offset(), like.size(), like.stride())


def _unowned(t: torch.Tensor) -> torch.Tensor:
    """t over the same memory, without keeping that memory alive."""
    storage = t.untyped_storage()
    return _view(torch._C._construct_storage_from_data_pointer(storage.data_ptr(), t.device, storage.nbytes()), t)


class HostCapture:
    """A compiled call as the host driver's graph trees run it.

    The host driver's compiled code returns musa tensors over memory of the kernel device's (CPU)
    allocator; the trees expect every output in their pool. So outside a capture (warm-up runs)
    outputs are copied into musa memory (allocated where the trees route it: their pool). Inside
    a capture the call computes the outputs' layout on scratch copies of the inputs it would
    mutate (on a stream that is not capturing, so nothing happens twice), allocates the outputs
    in the graph's pool, and records one task that, at each replay, runs the compiled call on the
    captured inputs and copies the results into them. Outputs that are (views of) inputs stay
    those views.
    """

    def __init__(self, model, mutated_input_idxs):
        self.model = model
        self.mutated = set(mutated_input_idxs)
        self._side = None

    def _over(self, storage, like: torch.Tensor) -> torch.Tensor:
        with streams.stream(self._side):  # a capture would record set_ instead of running it
            return _view(storage, like)

    def _in_musa_memory(self, results, inputs_by_storage, capturing: bool):
        """(outputs, [(index, output the results are copied into)])."""
        outputs, written, bases = [], [], {}
        for i, o in enumerate(results):
            if not isinstance(o, torch.Tensor) or o.device.type != "musa":
                outputs.append(o)
                continue
            storage = o.untyped_storage()
            key = storage.data_ptr()
            if key in inputs_by_storage:  # an input (or a view of one) comes back as itself
                outputs.append(o if not capturing else self._over(inputs_by_storage[key].untyped_storage(), o))
                continue
            if not capturing and (key == 0 or _C()._graph_tree_owns(storage._cdata)):
                outputs.append(o)
                continue
            if key not in bases:  # allocated where the trees route musa memory: their pool
                bases[key] = torch.empty(storage.nbytes(), dtype=torch.uint8, device=o.device)
            out = self._over(bases[key].untyped_storage(), o)
            outputs.append(out)
            written.append((i, out))
        return outputs, written

    def __call__(self, inputs):
        if self._side is None:
            self._side = streams.Stream()
        capturing = graphs.is_current_stream_capturing()
        static = list(inputs)
        inputs.clear()
        if capturing:
            with streams.stream(self._side):
                used = [x.clone() if i in self.mutated and isinstance(x, torch.Tensor) else x
                        for i, x in enumerate(static)]
                results = self.model(list(used))
        else:
            used = static
            results = self.model(list(static))
        is_list = isinstance(results, list)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        inputs_by_storage = {u.untyped_storage().data_ptr(): x for x, u in zip(static, used)
                             if isinstance(u, torch.Tensor) and u.device.type == "musa"}
        outputs, written = self._in_musa_memory(results, inputs_by_storage, capturing)
        if not capturing:
            for i, out in written:
                out.copy_(results[i])
        else:
            self._record_replay(static, written)
        return outputs if is_list else tuple(outputs)

    def _record_replay(self, static, written) -> None:
        # A graph owns none of the memory it reads and writes (as on CUDA): the trees decide
        # what stays alive.
        with streams.stream(self._side):
            static = [_unowned(x) if isinstance(x, torch.Tensor) else x for x in static]
            written = [(i, _unowned(out)) for i, out in written]
        model = self.model

        def replay():
            results = model(list(static))
            results = results if isinstance(results, (list, tuple)) else [results]
            for i, out in written:
                out.copy_(results[i])

        _C()._graphs._launch_host_call(replay)
