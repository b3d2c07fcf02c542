"""The ``"musagraphs"`` torch.compile backend: AOTAutograd graphs replayed as MUSA graphs.

The musa counterpart of torch's ``"cudagraphs"`` backend, without inductor:
AOTAutograd splits the captured program into a forward and a backward FX graph,
and each of them is run through :class:`_GraphRunner`:

1. the first call for a given input signature (devices, dtypes, shapes, strides,
   scalar values) runs the FX graph eagerly, as warm-up;
2. the second call copies its inputs into static tensors it owns and captures the
   FX graph running on them into a :class:`torch_musa.MUSAGraph`;
3. that call and every later one with the same signature copies the new inputs
   into the static ones, replays the graph, and hands back copies of the static
   outputs (so the next replay cannot overwrite what the caller holds).

Whatever cannot be captured safely runs eagerly instead, with a warning issued
once per reason: tensors that are not on one musa device, ops that need the host
to read device data (``.item()``, data-dependent shapes), too many distinct
input signatures, or a capture that fails.

This module must stay cheap to import: torch._dynamo is only imported when the
backend is registered or used. ``torch_musa`` calls
:func:`_install_lazy_registration` at import; it registers the backend the
moment torch._dynamo's backend registry is loaded (or at once if it already is).
The ``torch_dynamo_backends`` entry point ``musagraphs =
torch_musa.graphs.dynamo_backend:musagraphs`` is the packaging-level equivalent.
"""
from __future__ import annotations

import functools
import threading
import warnings
from typing import Any, Optional, Sequence

import torch

BACKEND_NAME = "musagraphs"

#: Distinct input signatures captured per compiled FX graph before falling back to eager.
MAX_CAPTURES_PER_GRAPH = 8

_REGISTRY_MODULE = "torch._dynamo.backends.registry"
_warned: set[str] = set()
_warn_lock = threading.Lock()


def _warn_once(reason: str) -> None:
    with _warn_lock:
        if reason in _warned:
            return
        _warned.add(reason)
    warnings.warn(f"musagraphs: running without MUSA graphs ({reason})", RuntimeWarning, stacklevel=3)


class _CannotCapture(Exception):
    """Raised while preparing a capture for inputs or graphs it cannot handle."""


# ----------------------------------------------------------------------------------------
# Static checks on one FX graph
# ----------------------------------------------------------------------------------------

def _meta_tensor(node) -> Optional[torch.Tensor]:
    val = node.meta.get("val", node.meta.get("fake_result"))
    return val if isinstance(val, torch.Tensor) else None


def _graph_skip_reason(gm: torch.fx.GraphModule) -> Optional[str]:
    """Why this FX graph can never be captured, or None."""
    devices = set()
    for node in gm.graph.nodes:
        val = node.meta.get("val", node.meta.get("fake_result"))
        for t in (val if isinstance(val, (list, tuple)) else (val,)):
            if isinstance(t, torch.Tensor):
                devices.add(t.device)
    bad = sorted(str(d) for d in devices if d.type != "musa")
    if bad:
        return f"the graph has tensors on {', '.join(bad)}"
    if len(devices) > 1:
        return f"the graph uses several musa devices ({', '.join(sorted(map(str, devices)))})"
    try:
        from torch._inductor.utils import get_first_incompatible_cudagraph_node
    except Exception:  # pragma: no cover - internal helper moved
        get_first_incompatible_cudagraph_node = None
    if get_first_incompatible_cudagraph_node is not None:
        node = get_first_incompatible_cudagraph_node(gm)
        if node is not None:
            return f"op {node.name} ({node.target}) cannot be captured"
    return None


def _mutated_input_indices(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Placeholders whose memory some op of the graph writes to."""
    from torch.multiprocessing.reductions import StorageWeakRef

    by_storage: dict[Any, set[int]] = {}
    index = 0
    mutated: set[int] = set()
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            t = _meta_tensor(node)
            if t is not None:
                by_storage.setdefault(StorageWeakRef(t.untyped_storage()), set()).add(index)
            index += 1
            continue
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        for pos, arg in enumerate(schema.arguments):
            if not (arg.alias_info and arg.alias_info.is_write):
                continue
            value = node.args[pos] if pos < len(node.args) else node.kwargs.get(arg.name)
            for v in (value if isinstance(value, (list, tuple)) else (value,)):
                t = _meta_tensor(v) if isinstance(v, torch.fx.Node) else None
                if t is not None:
                    mutated |= by_storage.get(StorageWeakRef(t.untyped_storage()), set())
    return tuple(sorted(mutated))


# ----------------------------------------------------------------------------------------
# Inputs: signatures and static copies
# ----------------------------------------------------------------------------------------

def _signature(args: Sequence[Any]) -> tuple[tuple, Optional[int]]:
    """A hashable key for the inputs, and the musa device index they live on.

    Raises _CannotCapture for inputs a graph cannot take.
    """
    key = []
    device = None
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.device.type != "musa":
                raise _CannotCapture(f"an input is on {a.device}, not on a musa device")
            if device is None:
                device = a.device.index
            elif a.device.index != device:
                raise _CannotCapture("inputs are on several musa devices")
            key.append((a.dtype, tuple(a.shape), tuple(a.stride())))
        elif isinstance(a, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)) or a is None:
            key.append((type(a).__name__, a if not isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool))
                        else str(a)))
        else:
            raise _CannotCapture(f"an input is a {type(a).__name__}")
    return tuple(key), device


def _static_like(a: Any) -> Any:
    """An input buffer the graph will own: same size, dtype and strides as ``a``, holding a copy of it."""
    if not isinstance(a, torch.Tensor):
        return a
    if torch._debug_has_internal_overlap(a) != 0:
        raise _CannotCapture("an input has overlapping memory (e.g. an expanded tensor)")
    static = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
    static.copy_(a)
    return static


# ----------------------------------------------------------------------------------------
# Outputs: handing back copies that keep the captured layout and aliasing
# ----------------------------------------------------------------------------------------

def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


class _OutputPlan:
    """How to turn the static outputs into what one call returns.

    * an output that views a static input is rebuilt as the same view of the caller's input;
    * outputs in the graph's own memory are copied, one copy per underlying storage, so
      outputs that aliased each other still do (with the same strides and offsets);
    * anything that is not a tensor is returned as it is.
    """

    def __init__(self, static_inputs: Sequence[Any], static_outputs: Sequence[Any]):
        inputs_by_storage = {}
        for i, s in enumerate(static_inputs):
            if isinstance(s, torch.Tensor) and s.untyped_storage().nbytes() > 0:
                inputs_by_storage.setdefault(_storage_key(s), i)
        self.steps: list[tuple] = []
        groups: dict[int, list[torch.Tensor]] = {}
        for o in static_outputs:
            if not isinstance(o, torch.Tensor):
                self.steps.append(("value", o))
            elif o.untyped_storage().nbytes() == 0:
                self.steps.append(("empty", o))
            elif _storage_key(o) in inputs_by_storage:
                i = inputs_by_storage[_storage_key(o)]
                s = static_inputs[i]
                same = (o.size() == s.size() and o.stride() == s.stride()
                        and o.storage_offset() == s.storage_offset() and o.dtype == s.dtype)
                self.steps.append(("input", i, same, tuple(o.size()), tuple(o.stride()),
                                   o.storage_offset() - s.storage_offset()))
            else:
                groups.setdefault(_storage_key(o), []).append(o)
                self.steps.append(("own", o))
        # A storage shared by outputs of one dtype is copied whole and re-viewed; otherwise
        # each output is cloned on its own.
        self.shared = {}
        for key, members in groups.items():
            dtype = members[0].dtype
            nbytes = members[0].untyped_storage().nbytes()
            if all(m.dtype == dtype for m in members) and nbytes % members[0].element_size() == 0:
                self.shared[key] = (members[0], nbytes // members[0].element_size())

    def outputs(self, args: Sequence[Any]) -> list[Any]:
        copies: dict[int, torch.Tensor] = {}
        result = []
        for step in self.steps:
            kind, o = step[0], step[1]
            if kind == "value":
                result.append(o)
            elif kind == "empty":
                result.append(torch.empty_strided(o.size(), o.stride(), dtype=o.dtype, device=o.device))
            elif kind == "input":
                _, i, same, size, stride, delta = step
                a = args[i]
                result.append(a if same else a.as_strided(size, stride, a.storage_offset() + delta))
            else:
                key = _storage_key(o)
                if key not in self.shared:
                    result.append(o.clone())
                    continue
                if key not in copies:
                    first, numel = self.shared[key]
                    copies[key] = first.as_strided((numel,), (1,), 0).clone()
                result.append(copies[key].as_strided(o.size(), o.stride(), o.storage_offset()))
        return result


# ----------------------------------------------------------------------------------------
# Running one FX graph through warm-up, capture and replay
# ----------------------------------------------------------------------------------------

_WARMED_UP = object()   # the signature ran once eagerly; capture on the next call
_EAGER = object()       # the signature cannot be captured; always run eagerly


class _Captured:
    def __init__(self, musa_graph, device: int, static_inputs, static_outputs, mutated: Sequence[int]):
        self.graph = musa_graph
        self.device = device
        self.static_inputs = static_inputs
        self.static_outputs = static_outputs    # kept alive: the replays write here
        self.tensor_inputs = [i for i, s in enumerate(static_inputs) if isinstance(s, torch.Tensor)]
        self.mutated = mutated
        self.plan = _OutputPlan(static_inputs, static_outputs)

    def run(self, args: Sequence[Any]) -> list[Any]:
        from .._core.device import current_device, device as device_ctx

        if current_device() != self.device:
            with device_ctx(self.device):
                return self._replay(args)
        return self._replay(args)

    def _replay(self, args: Sequence[Any]) -> list[Any]:
        for i in self.tensor_inputs:
            static = self.static_inputs[i]
            if static.data_ptr() != args[i].data_ptr():
                static.copy_(args[i])
        self.graph.replay()
        for i in self.mutated:  # the graph wrote into its copy of a caller's tensor: pass that on
            args[i].copy_(self.static_inputs[i])
        return self.plan.outputs(args)


class _SharedPools:
    """One graph memory pool per device, shared by all captures of one compiled program."""

    def __init__(self):
        self._pools: dict[int, tuple[int, int]] = {}

    def get(self, device: int):
        if device not in self._pools:
            from ._graphs import graph_pool_handle

            self._pools[device] = graph_pool_handle()
        return self._pools[device]


class _GraphRunner:
    """Runs one forward, backward or inference FX graph: warm-up, capture, then replays."""

    def __init__(self, gm: torch.fx.GraphModule, pools: _SharedPools, kind: str):
        self.gm = gm
        self.pools = pools
        self.kind = kind
        self.skip = _graph_skip_reason(gm)
        self.mutated = _mutated_input_indices(gm) if self.skip is None else ()
        self.entries: dict[tuple, Any] = {}

    def _eager(self, args):
        out = self.gm(*args)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def __call__(self, args):
        args = list(args)
        if self.skip is not None:
            _warn_once(f"{self.kind} graph: {self.skip}")
            return self._eager(args)
        try:
            key, device = _signature(args)
        except _CannotCapture as e:
            _warn_once(f"{self.kind} graph: {e}")
            return self._eager(args)
        if device is None:  # no tensor inputs at all: nothing tells us which device to capture on
            _warn_once(f"{self.kind} graph: it has no tensor inputs")
            return self._eager(args)
        entry = self.entries.get(key)
        if entry is None:
            if len(self.entries) >= MAX_CAPTURES_PER_GRAPH:
                _warn_once(f"{self.kind} graph: more than {MAX_CAPTURES_PER_GRAPH} distinct input shapes")
                return self._eager(args)
            self.entries[key] = _WARMED_UP
            return self._eager(args)
        if entry is _WARMED_UP:
            entry = self._capture(args, device)
            self.entries[key] = entry
        if entry is _EAGER:
            return self._eager(args)
        return entry.run(args)

    def _capture(self, args, device: int):
        from .._core.device import device as device_ctx
        from ._graphs import MUSAGraph, graph

        with device_ctx(device):
            try:
                static_inputs = [_static_like(a) for a in args]
                musa_graph = MUSAGraph()
                with graph(musa_graph, pool=self.pools.get(device), capture_error_mode="thread_local"):
                    out = self.gm(*static_inputs)
                static_outputs = list(out) if isinstance(out, (list, tuple)) else [out]
            except Exception as e:  # noqa: BLE001 - any failure means: run this signature eagerly
                _warn_once(f"{self.kind} graph: capture failed: {type(e).__name__}: {e}")
                return _EAGER
        return _Captured(musa_graph, device, static_inputs, static_outputs, self.mutated)


# ----------------------------------------------------------------------------------------
# The backend and its registration
# ----------------------------------------------------------------------------------------

def _runner_for(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *, pools: _SharedPools, kind: str):
    """The fw/bw/inference compiler given to AOTAutograd (its example inputs are fake tensors: unused).

    Returns a plain function: AOTAutograd wraps the backward in torch._dynamo.disable, which keeps
    a function's attributes (``_boxed_call``: it takes its arguments as one list).
    """
    runner = _GraphRunner(gm, pools, kind)

    def run(args):
        return runner(args)

    run._boxed_call = True
    run._musagraphs_runner = runner
    return run


def musagraphs(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any):
    """torch.compile backend: AOTAutograd forward/backward graphs, each replayed as MUSA graphs."""
    from torch._dynamo.backends.common import aot_autograd

    if kwargs:
        warnings.warn(f"musagraphs backend ignores the options {sorted(kwargs)}", stacklevel=2)
    pools = _SharedPools()
    compiler = aot_autograd(
        fw_compiler=functools.partial(_runner_for, pools=pools, kind="forward"),
        bw_compiler=functools.partial(_runner_for, pools=pools, kind="backward"),
        inference_compiler=functools.partial(_runner_for, pools=pools, kind="inference"),
    )
    return compiler(gm, example_inputs)


def _install_lazy_registration() -> None:
    """Make ``backend="musagraphs"`` resolvable without importing torch._dynamo now."""
    from .._import_hooks import after_import

    def register(registry) -> None:
        if BACKEND_NAME not in registry._COMPILER_FNS:
            registry.register_backend(compiler_fn=musagraphs, name=BACKEND_NAME)

    after_import(_REGISTRY_MODULE, register)
