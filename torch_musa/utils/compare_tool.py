"""Accuracy tools: compare every aten op run on musa against the CPU, and track NaN/Inf.

    from torch_musa.utils.compare_tool import CompareWithCPU, NanInfTracker, open_module_tracker

    open_module_tracker(model)              # op names carry the module path
    with CompareWithCPU(atol=1e-3, rtol=1e-3) as cmp:
        for step in range(n):
            train_step(); cmp.step()
    print(cmp.summary())                    # also printed at exit when verbose

Both tools are ``TorchDispatchMode``s: they see every aten op (forward and
backward, in-place and ``out=`` included), run it as usual, and inspect it.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

__all__ = [
    "CompareWithCPU",
    "NanInfTracker",
    "ComparisonStopped",
    "open_module_tracker",
    "compare_for_single_op",
    "DEFAULT_WHITE_LIST",
]

# Ops that need no check: views and metadata, copies, random fills and
# uninitialised allocations (their values are not defined to match the CPU).
DEFAULT_WHITE_LIST = frozenset(
    """
    view _unsafe_view view_as_real view_as_complex as_strided as_strided_ _reshape_alias
    t transpose permute expand expand_as squeeze unsqueeze slice select diagonal unfold
    alias detach lift_fresh split split_with_sizes unbind chunk narrow
    copy_ _copy_from _copy_from_and_resize _to_copy clone contiguous to
    set_ resize_ resize_as_ empty empty_like empty_strided new_empty new_empty_strided
    _local_scalar_dense is_same_size is_nonzero _has_compatible_shallow_copy_type
    normal normal_ uniform_ bernoulli bernoulli_ random_ exponential_ geometric_
    log_normal_ cauchy_ rand rand_like randn randn_like randint randint_like randperm
    multinomial dropout native_dropout native_dropout_backward feature_dropout
    alpha_dropout rrelu_with_noise _fused_dropout record_stream
    """.split()
)

# Operator namespaces never re-run on the CPU: collectives and profiler markers
# have side effects (re-running an allreduce would hang the other ranks).
_SKIPPED_NAMESPACES = frozenset(
    {"c10d", "_c10d_functional", "c10d_functional", "_dtensor", "profiler", "prim", "prims"}
)


class ComparisonStopped(RuntimeError):
    """Raised after ``dump_error_data=True`` saved the first failing op."""


# --------------------------------------------------------------------------
# Module tracking
# --------------------------------------------------------------------------


class _ModuleTrackerState:
    """Current module path and direction for op names (process-wide)."""

    def __init__(self) -> None:
        self.stack: List[str] = []
        self.backward_path: Optional[str] = None
        self.last_output_grad: Optional[torch.Tensor] = None
        self.handles: list = []

    def label(self) -> Tuple[Optional[str], str]:
        if torch._C._current_graph_task_id() != -1:  # inside autograd backward
            return self.backward_path, "backward"
        return (self.stack[-1] if self.stack else None), "forward"


_TRACKER = _ModuleTrackerState()


class _TrackerHandle:
    def __init__(self, handles: list) -> None:
        self._handles = handles

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        _TRACKER.stack.clear()
        _TRACKER.backward_path = None
        _TRACKER.last_output_grad = None

    def __enter__(self) -> "_TrackerHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def open_module_tracker(model: torch.nn.Module) -> _TrackerHandle:
    """Name ops after the module that runs them: ``Net/Encoder/Linear/torch.ops.aten.addmm(forward)``.

    Returns a handle; ``handle.remove()`` (or leaving ``with``) detaches the hooks.
    Backward ops are attributed to the innermost module whose output gradient
    was computed last.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"open_module_tracker expects an nn.Module, got {type(model).__name__}")
    paths: Dict[int, str] = {}

    def assign(mod: torch.nn.Module, prefix: str) -> None:
        path = f"{prefix}/{type(mod).__name__}" if prefix else type(mod).__name__
        paths.setdefault(id(mod), path)
        for child in mod.children():
            assign(child, paths[id(mod)])

    assign(model, "")
    def pre_hook(mod: torch.nn.Module, args: Any) -> None:
        caller = _TRACKER.stack[-1] if _TRACKER.stack else None
        _TRACKER.stack.append(paths[id(mod)])
        # When the gradient w.r.t. a module input is ready, the module's own
        # backward is done: ops that follow belong to the caller again.
        for t in tree_flatten(args)[0]:
            if isinstance(t, torch.Tensor) and t.requires_grad:

                def back_to_caller(grad: torch.Tensor, caller: Optional[str] = caller) -> None:
                    if _TRACKER.last_output_grad is not grad:
                        _TRACKER.backward_path = caller

                t.register_hook(back_to_caller)

    def post_hook(mod: torch.nn.Module, args: Any, output: Any) -> None:
        path = paths[id(mod)]
        if _TRACKER.stack and _TRACKER.stack[-1] == path:
            _TRACKER.stack.pop()
        # The innermost module hooks first; outer modules returning the same
        # tensor do not relabel it (an in-place module, e.g. ReLU(inplace=True),
        # bumps the version and does).
        for t in tree_flatten(output)[0]:
            if (
                isinstance(t, torch.Tensor)
                and t.requires_grad
                and getattr(t, "_compare_tool_tagged", None) != t._version
            ):
                t._compare_tool_tagged = t._version

                def enter_module(grad: torch.Tensor, path: str = path) -> None:
                    _TRACKER.backward_path = path
                    _TRACKER.last_output_grad = grad

                t.register_hook(enter_module)

    handles = []
    for mod in model.modules():
        handles.append(mod.register_forward_pre_hook(pre_hook))
        handles.append(mod.register_forward_hook(post_hook))
    handle = _TrackerHandle(handles)
    _TRACKER.handles.append(handle)
    return handle


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _normalize_op_name(name: str) -> str:
    """'torch.ops.aten.addmm.default' / 'aten.addmm' / 'addmm' -> 'addmm' (overload dropped)."""
    name = name.strip()
    if name.startswith("torch.ops."):
        name = name[len("torch.ops.") :]
    parts = name.split(".")
    if len(parts) >= 2:
        return parts[1]
    return parts[0]


def _op_key(func: Any) -> str:
    return f"torch.ops.{func.overloadpacket}" if hasattr(func, "overloadpacket") else str(func)


def _rank() -> int:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:
        pass
    return int(os.environ.get("RANK", "0"))


def _is_distributed() -> bool:
    try:
        import torch.distributed as dist

        return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    except Exception:
        return False


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return (
            f"Tensor(shape={tuple(x.shape)}, dtype={x.dtype}, stride={tuple(x.stride())}, "
            f"device={x.device})"
        )
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_describe(v) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    return repr(x)


def _on_device(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type not in ("cpu", "meta")


def _to_cpu(x: Any) -> Any:
    """Detached CPU copy (a real copy even for CPU tensors, so in-place ops stay separate)."""
    if isinstance(x, torch.Tensor):
        if x.device.type == "meta":
            return x
        return x.detach().to("cpu", copy=True)
    if isinstance(x, torch.device) and x.type not in ("cpu", "meta"):
        return torch.device("cpu")
    return x


_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _upcast(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.dtype in _LOW_PRECISION:
        return x.float()
    if isinstance(x, torch.dtype) and x in _LOW_PRECISION:
        return torch.float32
    return x


def _has_nan_inf(t: torch.Tensor) -> bool:
    if not (t.is_floating_point() or t.is_complex()) or t.numel() == 0:
        return False
    if t.is_complex():
        t = torch.view_as_real(t)
    return not bool(torch.isfinite(t).all().item())


@dataclass
class _Diff:
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    reason: str = ""
    detail: str = ""


def _compare_tensors(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> _Diff:
    out_c = out.detach().to("cpu")
    if tuple(out_c.shape) != tuple(ref.shape):
        return _Diff(False, math.inf, math.inf, f"shape {tuple(out_c.shape)} != cpu {tuple(ref.shape)}")
    if out_c.numel() == 0:
        return _Diff(True)
    if out_c.is_complex() or ref.is_complex():
        out_c, ref = torch.view_as_real(out_c.to(torch.complex128)), torch.view_as_real(ref.to(torch.complex128))
    if out_c.dtype == torch.bool or ref.dtype == torch.bool or not (
        out_c.is_floating_point() or ref.is_floating_point()
    ):
        a, b = out_c.to(torch.int64), ref.to(torch.int64)
        bad = a != b
        diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
        max_abs = float(diff.max()) if diff.numel() else 0.0
        max_rel = max_abs / max(float(b.to(torch.float64).abs().max()), 1e-30) if max_abs else 0.0
    else:
        a, b = out_c.to(torch.float64), ref.to(torch.float64)
        bad = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        finite = torch.isfinite(a) & torch.isfinite(b)
        diff = torch.where(finite, (a - b).abs(), torch.zeros_like(a))
        max_abs = float(diff.max())
        # Relative error where it means something: elements whose reference
        # magnitude exceeds atol (smaller ones are judged by atol alone).
        denom = b.abs()
        rel = torch.where(denom > atol, diff / denom.clamp_min(1e-300), torch.zeros_like(diff))
        max_rel = float(rel.max())
    if not bool(bad.any()):
        return _Diff(True, max_abs, max_rel)
    idx = bad.nonzero()[:5]
    items = []
    for row in idx.tolist():
        i = tuple(row)
        items.append(f"{list(i)}: musa={out_c[i].item()!r} cpu={ref[i].item()!r}")
    n_bad = int(bad.sum())
    detail = f"{n_bad}/{bad.numel()} elements differ; first: " + "; ".join(items)
    if max_abs == 0.0:  # only NaN/Inf placement differs
        max_abs = max_rel = math.inf
    return _Diff(False, max_abs, max_rel, "values differ", detail)


# --------------------------------------------------------------------------
# Shared base: activation window, logging, summary
# --------------------------------------------------------------------------


class _OpStats:
    __slots__ = ("calls", "failures", "max_abs", "max_rel", "where")

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.where = ""


class _BaseTool(TorchDispatchMode):
    _log_name = "tool"

    def __init__(
        self,
        enabled: bool = True,
        atol: float = 0.001,
        rtol: float = 0.001,
        target_list: Optional[Iterable[str]] = None,
        white_list: Optional[Iterable[str]] = None,
        dump_error_data: bool = False,
        verbose: bool = True,
        enable_ranks: Optional[Sequence[int]] = None,
        should_log_to_file: bool = False,
        output_dir: str = "",
        start_step: Optional[int] = None,
        end_step: Optional[int] = None,
    ) -> None:
        super().__init__()
        if atol < 0 or rtol < 0:
            raise ValueError(f"atol and rtol must be >= 0, got atol={atol}, rtol={rtol}")
        if start_step is not None and end_step is not None and end_step < start_step:
            raise ValueError(f"end_step ({end_step}) must be >= start_step ({start_step})")
        for name, lst in (("target_list", target_list), ("white_list", white_list)):
            if isinstance(lst, str):
                raise TypeError(f"{name} must be a list of op names, not a string")
        self.enabled = enabled
        self.atol, self.rtol = float(atol), float(rtol)
        self.target_list = None if target_list is None else {_normalize_op_name(n) for n in target_list}
        extra_white = {_normalize_op_name(n) for n in (white_list or ())}
        self.white_list = frozenset(DEFAULT_WHITE_LIST | extra_white)
        self.dump_error_data = dump_error_data
        self.verbose = verbose
        self.enable_ranks = None if enable_ranks is None else set(int(r) for r in enable_ranks)
        self.should_log_to_file = should_log_to_file
        self.output_dir = output_dir or os.getcwd()
        self.start_step, self.end_step = start_step, end_step
        self.step_count = 0
        self.stats: "OrderedDict[str, _OpStats]" = OrderedDict()
        self.records: List[Dict[str, Any]] = []
        self._log_file = None
        self._summary_printed = False
        self._atexit_registered = False

    # -- control ------------------------------------------------------------
    def step(self) -> None:
        """Mark the end of a training step (for ``start_step``/``end_step``)."""
        self.step_count += 1

    def _active(self) -> bool:
        if not self.enabled:
            return False
        if self.start_step is not None and self.step_count < self.start_step:
            return False
        if self.end_step is not None and self.step_count >= self.end_step:
            return False
        if self.enable_ranks is not None and _rank() not in self.enable_ranks:
            return False
        return True

    def _selected(self, func: Any) -> bool:
        namespace = getattr(func, "namespace", "aten")
        if namespace in _SKIPPED_NAMESPACES:
            return False
        name = _normalize_op_name(str(func.overloadpacket)) if hasattr(func, "overloadpacket") else str(func)
        if self.target_list is not None:
            return name in self.target_list
        return name not in self.white_list

    def _display_name(self, func: Any) -> str:
        path, direction = _TRACKER.label()
        key = _op_key(func)
        return f"{path}/{key}({direction})" if path else f"{key}({direction})"

    # -- logging ------------------------------------------------------------
    def _log_path(self) -> str:
        return os.path.join(self.output_dir, f"{self._log_name}_rank{_rank()}.log")

    def _log(self, line: str) -> None:
        if self.verbose:
            print(line, file=sys.stdout, flush=True)
        if self.should_log_to_file:
            if self._log_file is None:
                os.makedirs(self.output_dir, exist_ok=True)
                self._log_file = open(self._log_path(), "a", encoding="utf-8")
            self._log_file.write(line + "\n")
            self._log_file.flush()

    def _stat(self, key: str) -> _OpStats:
        st = self.stats.get(key)
        if st is None:
            st = self.stats[key] = _OpStats()
        return st

    # -- summary -------------------------------------------------------------
    def summary(self) -> str:
        """Table of every checked op: calls, failures, worst abs/rel error."""
        rows = [("op", "calls", "failures", "max_abs_err", "max_rel_err", "worst at")]
        for key, st in self.stats.items():
            rows.append(
                (key, str(st.calls), str(st.failures), f"{st.max_abs:.3g}", f"{st.max_rel:.3g}", st.where)
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"{self.__class__.__name__} summary (rank {_rank()}, {len(self.stats)} ops)"]
        for n, r in enumerate(rows):
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __enter__(self) -> "_BaseTool":
        if not self._atexit_registered:
            # Entered without ``with`` (e.g. ``tool.__enter__()`` for a whole
            # script): the summary still appears when the process ends.
            import atexit

            atexit.register(self._finish)
            self._atexit_registered = True
        return super().__enter__()

    def _finish(self) -> None:
        if not self._summary_printed and self.stats:
            self._summary_printed = True
            self._log(self.summary())
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __exit__(self, *exc: Any) -> Any:
        result = super().__exit__(*exc)
        self._finish()
        return result


# --------------------------------------------------------------------------
# CompareWithCPU
# --------------------------------------------------------------------------


class CompareWithCPU(_BaseTool):
    """Run every aten op on its device *and* on CPU copies of its inputs; report mismatches.

    Inputs are copied before the op runs, so in-place and ``out=`` ops compare
    right.  Ops the CPU lacks for a dtype (e.g. some half kernels) are rerun in
    float32 and compared at the device dtype.  Ops with no tensor on a non-CPU
    device are not checked (there is nothing to compare against).
    """

    _log_name = "compare_with_cpu"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self._active() or not self._selected(func):
            return func(*args, **kwargs)
        flat_in = tree_flatten((args, kwargs))[0]
        device_in = any(_on_device(x) for x in flat_in) or any(
            isinstance(x, torch.device) and x.type not in ("cpu", "meta") for x in flat_in
        )
        if not device_in:
            return func(*args, **kwargs)
        cpu_args, cpu_kwargs = tree_map(_to_cpu, (args, kwargs))
        saved_inputs = (cpu_args, cpu_kwargs) if self.dump_error_data else None
        if saved_inputs is not None:
            saved_inputs = tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, saved_inputs)
        out = func(*args, **kwargs)
        name = self._display_name(func)
        key = _op_key(func)
        ref, note, ref_args, ref_kwargs = self._run_reference(func, cpu_args, cpu_kwargs)
        if ref is _UNTESTED:
            self._log(f"[WARNING] {name}: untested, the CPU cannot run it ({note})")
            self.records.append({"kind": "untested", "op": name, "reason": note})
            return out
        self._check(func, name, key, args, kwargs, out, ref_args, ref_kwargs, ref, note, saved_inputs)
        return out

    def _run_reference(self, func, cpu_args, cpu_kwargs):
        """Run on the CPU copies; returns (result, note, args used, kwargs used)."""
        try:
            return func(*cpu_args, **cpu_kwargs), "", cpu_args, cpu_kwargs
        except Exception as e:  # retry in float32 (CPU lacks some low-precision kernels)
            first = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            flat = tree_flatten((cpu_args, cpu_kwargs))[0]
            if not any(
                (x.dtype if isinstance(x, torch.Tensor) else x) in _LOW_PRECISION
                for x in flat
                if isinstance(x, (torch.Tensor, torch.dtype))
            ):
                return _UNTESTED, first, None, None
            up_args, up_kwargs = tree_map(_upcast, (cpu_args, cpu_kwargs))
            try:
                ref = func(*up_args, **up_kwargs)
            except Exception as e2:
                return _UNTESTED, f"{first}; float32 retry: {type(e2).__name__}: {e2}", None, None
            return ref, "rerun in float32", up_args, up_kwargs

    def _pairs(self, func, args, kwargs, out, ref_args, ref_kwargs, ref):
        """(label, device tensor, cpu tensor) pairs: outputs, then mutated inputs."""
        pairs = []
        outs, refs = tree_flatten(out)[0], tree_flatten(ref)[0]
        for i, (o, r) in enumerate(zip(outs, refs)):
            if isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor):
                pairs.append((f"output {i}", o, r))
        schema = getattr(func, "_schema", None)
        if schema is None:
            return pairs
        for pos, arg in enumerate(schema.arguments):
            if arg.alias_info is None or not arg.alias_info.is_write:
                continue
            if pos < len(args):
                dev, cpu = args[pos], ref_args[pos]
            elif arg.name in kwargs:
                dev, cpu = kwargs[arg.name], ref_kwargs[arg.name]
            else:
                continue
            for j, (d, c) in enumerate(zip(tree_flatten(dev)[0], tree_flatten(cpu)[0])):
                if isinstance(d, torch.Tensor) and isinstance(c, torch.Tensor):
                    if any(d is o for _, o, _ in pairs):
                        continue
                    pairs.append((f"mutated input '{arg.name}'[{j}]", d, c))
        return pairs

    def _check(self, func, name, key, args, kwargs, out, ref_args, ref_kwargs, ref, note, saved_inputs):
        st = self._stat(key)
        st.calls += 1
        failures = []
        worst_abs = worst_rel = 0.0
        for label, dev, cpu in self._pairs(func, args, kwargs, out, ref_args, ref_kwargs, ref):
            if dev.dtype in _LOW_PRECISION and cpu.dtype != dev.dtype:
                cpu = cpu.to(dev.dtype)  # float32 rerun: compare at the device dtype
            d = _compare_tensors(dev, cpu, self.atol, self.rtol)
            worst_abs, worst_rel = max(worst_abs, d.max_abs), max(worst_rel, d.max_rel)
            if not d.ok:
                failures.append((label, dev, cpu, d))
        if (worst_abs > 0 or worst_rel > 0) and (worst_abs >= st.max_abs or worst_rel >= st.max_rel):
            st.where = name
        st.max_abs, st.max_rel = max(st.max_abs, worst_abs), max(st.max_rel, worst_rel)
        if not failures:
            return
        st.failures += 1
        lines = [f"[ERROR] {name}: musa result differs from cpu (atol={self.atol}, rtol={self.rtol})"]
        if note:
            lines.append(f"    note: {note}")
        lines.append(f"    inputs: {_describe(list(args))}" + (f" kwargs: {_describe(kwargs)}" if kwargs else ""))
        for label, dev, cpu, d in failures:
            lines.append(
                f"    {label}: musa {_describe(dev)} vs cpu {_describe(cpu)}: {d.reason}; "
                f"max_abs_err={d.max_abs:.6g} max_rel_err={d.max_rel:.6g}"
            )
            if d.detail:
                lines.append(f"      {d.detail}")
        self._log("\n".join(lines))
        self.records.append(
            {"kind": "mismatch", "op": name, "max_abs": worst_abs, "max_rel": worst_rel, "step": self.step_count}
        )
        if self.dump_error_data:
            self._dump(func, saved_inputs, out)

    def _dump(self, func, saved_inputs, out) -> None:
        os.makedirs(self.output_dir, exist_ok=True)
        base = str(func.overloadpacket) if hasattr(func, "overloadpacket") else str(func)
        suffix = f"_rank{_rank()}" if _is_distributed() or self.enable_ranks is not None else ""
        in_path = os.path.join(self.output_dir, f"{base}_inputs{suffix}.pkl")
        out_path = os.path.join(self.output_dir, f"{base}_outputs{suffix}.pkl")
        device = next((x.device for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor)), None)
        with open(in_path, "wb") as f:
            pickle.dump(
                {"op": str(func), "args": saved_inputs[0], "kwargs": saved_inputs[1], "device": str(device)}, f
            )
        with open(out_path, "wb") as f:
            pickle.dump({"op": str(func), "outputs": tree_map(_to_cpu, out)}, f)
        self._log(f"[ERROR] dumped failing op to {in_path} and {out_path}; stopping")
        raise ComparisonStopped(f"{func} differs from cpu; inputs dumped to {in_path}, outputs to {out_path}")


class _Untested:
    pass


_UNTESTED = _Untested()


# --------------------------------------------------------------------------
# NanInfTracker
# --------------------------------------------------------------------------


class NanInfTracker(_BaseTool):
    """Flag every op whose inputs or outputs hold NaN/Inf, on any device (CPU included).

    The first op that *produces* a NaN/Inf from clean inputs is marked
    ``first produced here`` and kept in :attr:`first_nan_inf_op`.
    """

    _log_name = "nan_inf_tracker"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.first_nan_inf_op: Optional[str] = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self._active() or not self._selected(func):
            return func(*args, **kwargs)
        bad_in = [
            i for i, x in enumerate(tree_flatten((args, kwargs))[0]) if isinstance(x, torch.Tensor) and _has_nan_inf(x)
        ]
        out = func(*args, **kwargs)
        bad_out = [i for i, x in enumerate(tree_flatten(out)[0]) if isinstance(x, torch.Tensor) and _has_nan_inf(x)]
        key = _op_key(func)
        st = self._stat(key)
        st.calls += 1
        if not bad_in and not bad_out:
            return out
        st.failures += 1
        name = self._display_name(func)
        produced = bool(bad_out) and not bad_in
        if produced and self.first_nan_inf_op is None:
            self.first_nan_inf_op = name
        st.max_abs = st.max_rel = math.inf
        st.where = st.where or name
        where = []
        if bad_in:
            where.append(f"inputs {bad_in}")
        if bad_out:
            where.append(f"outputs {bad_out}")
        tag = " (first produced here)" if produced else ""
        self._log(
            f"[WARNING] {name}: NaN/Inf in {' and '.join(where)}{tag}; "
            f"inputs: {_describe(list(args))}; outputs: {_describe(out)}"
        )
        self.records.append(
            {"kind": "nan_inf", "op": name, "inputs": bad_in, "outputs": bad_out, "produced": produced, "step": self.step_count}
        )
        return out

    def summary(self) -> str:
        text = super().summary()
        return text + f"\nfirst op producing NaN/Inf: {self.first_nan_inf_op or 'none'}"


# --------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------


def compare_for_single_op(
    pkl_path: str, op_func: Callable, atol: float = 0.001, rtol: float = 0.001, device: Optional[str] = None
) -> bool:
    """Replay a dumped op: run ``op_func`` on the dumped inputs on the device and on CPU, compare.

    ``pkl_path`` is the ``<op>_inputs[_rankR].pkl`` written by ``dump_error_data=True``.
    Returns True when all outputs match within tolerance (details are printed).
    """
    if not os.path.isfile(pkl_path):
        raise FileNotFoundError(f"no such dump file: {pkl_path}")
    if not callable(op_func):
        raise TypeError(f"op_func must be callable, got {type(op_func).__name__}")
    with open(pkl_path, "rb") as f:
        data = pickle.load(f)
    if not isinstance(data, dict) or "args" not in data:
        raise ValueError(f"{pkl_path} is not an inputs dump written by CompareWithCPU (no 'args')")
    target = device or data.get("device") or "cpu"
    if target == "None":
        target = "cpu"
    args, kwargs = data["args"], data.get("kwargs", {})
    dev_args, dev_kwargs = tree_map(
        lambda x: x.to(target) if isinstance(x, torch.Tensor) else x, (args, kwargs)
    )
    cpu_args, cpu_kwargs = tree_map(_to_cpu, (args, kwargs))
    out = op_func(*dev_args, **dev_kwargs)
    try:
        ref = op_func(*cpu_args, **cpu_kwargs)
    except Exception:
        ref = op_func(*tree_map(_upcast, cpu_args), **tree_map(_upcast, cpu_kwargs))
    ok = True
    for i, (o, r) in enumerate(zip(tree_flatten(out)[0], tree_flatten(ref)[0])):
        if not (isinstance(o, torch.Tensor) and isinstance(r, torch.Tensor)):
            continue
        if o.dtype in _LOW_PRECISION and r.dtype != o.dtype:
            r = r.to(o.dtype)
        d = _compare_tensors(o, r, atol, rtol)
        status = "OK" if d.ok else "[ERROR]"
        print(f"{status} {data.get('op', op_func)} output {i} on {target}: max_abs_err={d.max_abs:.6g} "
              f"max_rel_err={d.max_rel:.6g} {d.detail}")
        ok = ok and d.ok
    return ok
