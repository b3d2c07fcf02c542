"""MUSA Graphs: record a stream's work once, replay it with one launch.

This is the musa counterpart of ``torch.cuda.graphs``: the same public names
(``MUSAGraph`` standing in for ``CUDAGraph``), the same arguments and the same
behaviour, so code written for CUDA graphs ports by replacing ``cuda`` with
``musa``.

* :class:`MUSAGraph` holds one captured graph.
* :class:`graph` is the context manager that captures the work issued inside it.
* :func:`make_graphed_callables` turns modules or functions into versions whose
  forward and backward passes each replay a captured graph.
* :func:`graph_pool_handle` and :func:`is_current_stream_capturing` are the small
  helpers around them.

The recording itself is done by the extension (``torch_musa._C._graphs``); this
module only adds argument checking, documentation and the higher-level tools.
"""
from __future__ import annotations

import gc
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Optional, Union

import torch
from torch import Tensor
from torch.utils import _pytree as pytree

from .. import _C, _version_gate
from . import lifecycle as _graph_lifecycle
from .lifecycle import (
    register_graph_capture_end_hook,
    register_graph_capture_start_hook,
    register_graph_destroy_hook,
    register_graph_instantiate_hook,
    register_graph_replay_end_hook,
    register_graph_replay_start_hook,
)

__all__ = [
    "MUSAGraph",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
    "make_graphed_callables",
    *_graph_lifecycle.__all__,
]

#: An opaque memory-pool token: what :func:`graph_pool_handle` and
#: :meth:`MUSAGraph.pool` return and what ``pool=`` arguments accept.
PoolHandle = tuple[int, int]

#: The stream-capture modes a capture may run in (cudaStreamCaptureMode's three).
CAPTURE_ERROR_MODES = ("global", "thread_local", "relaxed")

_NO_GRAPH_SUPPORT = (
    "this torch_musa extension was built without MUSA Graph support "
    "(torch_musa._C has no _graphs submodule); rebuild torch_musa to use torch.musa graphs"
)

_graphs_ext = getattr(_C, "_graphs", None)

if _graphs_ext is not None:
    _GraphBase = _graphs_ext._MUSAGraph
else:

    class _GraphBase:  # type: ignore[no-redef]
        """Stand-in base used when the extension lacks graph support: refuses to construct."""

        def __init__(self, *args, **kwargs):
            raise RuntimeError(_NO_GRAPH_SUPPORT)


def _ext():
    if _graphs_ext is None:
        raise RuntimeError(_NO_GRAPH_SUPPORT)
    return _graphs_ext


def _check_capture_error_mode(capture_error_mode: Any) -> str:
    if not isinstance(capture_error_mode, str) or capture_error_mode not in CAPTURE_ERROR_MODES:
        allowed = ", ".join(repr(m) for m in CAPTURE_ERROR_MODES)
        raise ValueError(f"capture_error_mode must be one of {allowed}; got {capture_error_mode!r}")
    return capture_error_mode


def _check_pool(pool: Any) -> Optional[PoolHandle]:
    if pool is None:
        return None
    if (isinstance(pool, (tuple, list)) and len(pool) == 2
            and all(isinstance(p, int) and not isinstance(p, bool) for p in pool)):
        return (int(pool[0]), int(pool[1]))
    raise TypeError(
        "pool must be a token from torch.musa.graph_pool_handle() or MUSAGraph.pool() "
        f"(a tuple of two ints); got {pool!r}"
    )


def is_current_stream_capturing() -> bool:
    """Tell whether a graph capture is in progress on the current musa stream.

    Returns ``False`` when no capture is running (and also when the extension was
    built without graph support, since then nothing can be capturing).
    """
    if _graphs_ext is None:
        return False
    return bool(_graphs_ext._is_current_stream_capturing())


def graph_pool_handle() -> PoolHandle:
    """Return a fresh token naming a graph memory pool on the current musa device.

    Pass the token as ``pool=`` to several captures (:class:`graph`,
    :meth:`MUSAGraph.capture_begin`, :func:`make_graphed_callables`) to let them
    share one private pool. Sharing is only safe when the graphs are replayed in
    the order they were captured, one after another.

    .. warning::
        Beta API, like its CUDA counterpart; it may change.
    """
    from .._core.device import current_device

    return tuple(_ext()._graph_pool_handle(current_device()))  # type: ignore[return-value]


class MUSAGraph(_GraphBase):
    """One captured MUSA graph: a recording of the work issued on a stream, replayable at will.

    Create it empty, fill it with :class:`torch.musa.graph` (or
    :meth:`capture_begin` / :meth:`capture_end`), then call :meth:`replay` as often
    as needed. Replays read and write exactly the memory the capture used, so feed
    new data by copying it into the tensors the captured work read, and read
    results from the tensors it wrote.

    Arguments:
        keep_graph (bool, optional): with the default ``False``, capture end also
            instantiates the executable graph and drops the recorded one. With
            ``True`` the recorded graph is kept after :meth:`capture_end` and the
            executable graph is built by :meth:`instantiate` (called for you by the
            first :meth:`replay` if you did not call it; calling it yourself keeps
            that cost out of the first replay).

    Lifecycle hooks (torch.cuda's, from torch 2.14) run at capture start and end, after
    instantiation and around each replay; destroy callbacks and retained objects are released
    when the graph is reset or collected. See :mod:`torch_musa.graphs.lifecycle`.

    .. warning::
        Beta API, like :class:`torch.cuda.CUDAGraph`; it may change.
    """

    def __init__(self, keep_graph: bool = False):
        super().__init__(keep_graph)
        self._keep_graph = keep_graph
        self._capture_start_hooks: OrderedDict = OrderedDict()
        self._capture_end_hooks: OrderedDict = OrderedDict()
        self._post_instantiate_hooks: OrderedDict = OrderedDict()
        self._replay_start_hooks: OrderedDict = OrderedDict()
        self._replay_end_hooks: OrderedDict = OrderedDict()
        self._arm_retained()

    def _arm_retained(self) -> None:
        # The finalizer is bound to the holder, never to self (that would keep the graph alive).
        self._retained = _graph_lifecycle.RetainedCallbacks()
        self._retained_finalizer = weakref.finalize(self, self._retained.fire)
        ids: set = set()  # no kernel annotations on musa: the destroy hooks get an empty set
        self.register_destroy_callback(lambda: _graph_lifecycle.run_global(_graph_lifecycle._destroy, ids))

    def __getattr__(self, name):
        # Names torch.cuda.CUDAGraph has on newer torches that MUSA Graph lacks: a clear error.
        err = _version_gate.unsupported_graph_api("MUSAGraph", name)
        if err is not None:
            raise err
        raise AttributeError(f"'MUSAGraph' object has no attribute '{name}'")

    def capture_begin(self, pool: Optional[PoolHandle] = None, capture_error_mode: str = "global") -> None:
        """Start recording the work issued on the current musa stream into this graph.

        Usually called for you by :class:`torch.musa.graph` or
        :func:`torch.musa.make_graphed_callables`. The current stream must not be
        the device's default stream.

        Arguments:
            pool (optional): a token from :func:`torch.musa.graph_pool_handle` or from
                another graph's :meth:`pool`, saying this capture may allocate from
                that graph pool instead of a new private one.
            capture_error_mode (str, optional): how strictly the driver refuses
                capture-unsafe calls (such as a raw device allocation) while the
                capture runs: ``"global"`` (the default) refuses them from any
                thread, ``"thread_local"`` only from this thread, ``"relaxed"``
                never. Keep the default unless you know why you need another.
        """
        mode = _check_capture_error_mode(capture_error_mode)
        super().capture_begin(_check_pool(pool), mode)
        # The capture is live: global hooks first, then this graph's (as instantiate()).
        _graph_lifecycle.run_global(_graph_lifecycle._capture_start, self)
        try:
            _graph_lifecycle.run_own(self._capture_start_hooks, self)
        except BaseException:
            self.reset()  # abandons the live capture, so the stream can run and capture again
            raise

    def capture_end(self) -> None:
        """Stop recording on the current stream; afterwards :meth:`replay` may be called.

        Raises when the capture was invalidated (for example by a capture-unsafe
        call inside it). Usually called for you by :class:`torch.musa.graph`.
        Capture-end hooks run once the capture has ended, before instantiation.
        """
        self.capture_end_pre()
        # A hook's error propagates and leaves the capture unfinalized (reset() clears it).
        _graph_lifecycle.run_global(_graph_lifecycle._capture_end, self)
        _graph_lifecycle.run_own(self._capture_end_hooks, self)
        if not self._keep_graph:
            self.instantiate()  # here, so the instantiate hooks run
        self.capture_end_post()

    def capture_end_pre(self) -> None:
        """End the capture without finalizing it: the first half of :meth:`capture_end`.

        Between this and :meth:`capture_end_post` the ended capture can be looked at; a graph
        made with ``keep_graph=False`` must be instantiated before :meth:`capture_end_post`."""
        super().capture_end_pre()

    def capture_end_post(self) -> None:
        """Finalize a capture ended by :meth:`capture_end_pre`."""
        super().capture_end_post()

    def instantiate(self) -> None:
        """Build the executable graph from the recorded one.

        Done automatically at :meth:`capture_end` when ``keep_graph=False``, and by
        the first :meth:`replay` otherwise; call it yourself after changing a kept
        graph, or to move that cost out of the first replay. Instantiate hooks run after it.
        """
        super().instantiate()
        _graph_lifecycle.run_global(_graph_lifecycle._instantiate, self)
        _graph_lifecycle.run_own(self._post_instantiate_hooks, self)

    def replay(self) -> None:
        """Run the recorded work again, on the current musa stream.

        Replay-start hooks run just before the launch (one that raises cancels it), and
        replay-end hooks once it is enqueued, also when the launch raised."""
        if self._retained.sync_before_fire:
            from ..streams import current_stream

            self._retained.replay_streams.add(current_stream())
        if self._has_capture and not self._has_graph_exec:
            self.instantiate()  # a kept graph's first replay; here, so the instantiate hooks run
        if _graph_lifecycle._replay_start:
            _graph_lifecycle.run_global(_graph_lifecycle._replay_start, self)
        if self._replay_start_hooks:
            _graph_lifecycle.run_own(self._replay_start_hooks, self)
        try:
            super().replay()
        finally:
            if _graph_lifecycle._replay_end:
                _graph_lifecycle.run_global(_graph_lifecycle._replay_end, self)
            if self._replay_end_hooks:
                _graph_lifecycle.run_own(self._replay_end_hooks, self)

    def reset(self) -> None:
        """Drop the graph this object holds (and its claim on its memory pool); it can capture again.

        This capture cycle's destroy callbacks run first, and its retained objects are let go."""
        self._retained.fire()
        self._retained_finalizer.detach()
        self._arm_retained()
        super().reset()

    def register_capture_start_hook(self, hook: Callable[[MUSAGraph], None]):
        """Run ``hook(graph)`` when this graph's capture begins, inside the live capture (musa
        work it issues is captured). Hooks run in registration order; the returned handle's
        ``remove()`` unregisters it."""
        return _graph_lifecycle.add_hook(self._capture_start_hooks, hook)

    def register_capture_end_hook(self, hook: Callable[[MUSAGraph], None]):
        """Run ``hook(graph)`` when this graph's capture has ended, before it is instantiated.
        Not run when ending the capture fails; a hook that raises stops the later ones."""
        return _graph_lifecycle.add_hook(self._capture_end_hooks, hook)

    def register_post_instantiate_hook(self, hook: Callable[[MUSAGraph], None]):
        """Run ``hook(graph)`` after each instantiation of this graph."""
        return _graph_lifecycle.add_hook(self._post_instantiate_hooks, hook)

    def register_replay_start_hook(self, hook: Callable[[MUSAGraph], None]):
        """Run ``hook(graph)`` at the start of every replay of this graph, before its launch."""
        return _graph_lifecycle.add_hook(self._replay_start_hooks, hook)

    def register_replay_end_hook(self, hook: Callable[[MUSAGraph], None]):
        """Run ``hook(graph)`` after every replay of this graph is enqueued (also when the
        launch raised, so start and end hooks stay balanced)."""
        return _graph_lifecycle.add_hook(self._replay_end_hooks, hook)

    def register_destroy_callback(self, cb: Callable[[], None], *, synchronize_before_release: bool = False):
        """Run ``cb()`` once when this graph is reset or destroyed, before its memory is let go.

        ``cb`` must not reference the graph (the graph would never be collected). Errors are
        ignored. With ``synchronize_before_release=True`` the streams the graph was replayed on
        are synchronized first, so a callback may free memory a replay in flight still uses."""
        if synchronize_before_release:
            self._retained.sync_before_fire = True
        return _graph_lifecycle.add_hook(self._retained.callbacks, cb)

    def retain_object(self, obj: object, *, synchronize_before_release: bool = False):
        """Keep ``obj`` alive until this graph is reset or destroyed (``remove()`` on the returned
        handle lets it go sooner). ``obj`` must not reference the graph.
        ``synchronize_before_release`` as for :meth:`register_destroy_callback`."""
        if synchronize_before_release:
            self._retained.sync_before_fire = True
        return _graph_lifecycle.add_entry(self._retained.objects, obj)

    def pool(self) -> PoolHandle:
        """Return the token of this graph's memory pool.

        Passing it as ``pool=`` to another capture lets that capture share this
        graph's memory.
        """
        return tuple(super().pool())  # type: ignore[return-value]

    def pools(self) -> list[PoolHandle]:
        """Return the tokens of every memory pool this graph holds (a musa graph holds one)."""
        return [self.pool()]

    def enable_debug_mode(self) -> None:
        """Keep what :meth:`debug_dump` needs; call it before capturing."""
        return super().enable_debug_mode()

    def debug_dump(self, debug_path: str, *, verbose: bool = True) -> None:
        """Write a description of the captured graph to ``debug_path`` (Graphviz dot).

        Arguments:
            debug_path (str): file to write; needs :meth:`enable_debug_mode` to
                have been called before the capture.
            verbose (bool): node details (the musa dump always has them; accepted as
                torch.cuda's is).
        """
        return super().debug_dump(debug_path)

    def register_generator_state(self, generator: torch.Generator) -> None:
        """Make replays of this graph advance ``generator`` as the captured random ops did.

        The default musa generator of the capturing device is registered for you;
        register any other musa generator that the captured work draws from, so each
        replay draws new numbers from it instead of repeating the captured ones.

        Arguments:
            generator (torch.Generator): a musa generator.
        """
        return super().register_generator_state(generator)


class graph:
    """Context manager capturing the musa work issued inside it into a :class:`MUSAGraph`.

    On entry it waits for the device to be idle, collects garbage and returns
    cached allocator blocks (so the capture has as much memory as possible), makes
    the capture stream current and starts the capture; on exit it ends the capture
    and restores the previous stream. Replay the result with
    :meth:`MUSAGraph.replay`.

    Arguments:
        musa_graph (torch.musa.MUSAGraph): the graph to capture into.
        pool (optional): a token from :func:`torch.musa.graph_pool_handle` or
            another graph's :meth:`MUSAGraph.pool`, letting this capture share that
            memory pool.
        stream (torch.musa.Stream, optional): the stream to capture on. Without it,
            one side stream per device, created on first use and kept for the whole
            process (``graph.default_capture_stream`` for the first device used), is
            used by every capture.
        capture_error_mode (str, optional): ``"global"``, ``"thread_local"`` or
            ``"relaxed"``; see :meth:`MUSAGraph.capture_begin`.

    If the body raises, the capture is still ended (and the graph reset when the
    capture had been invalidated), the stream restored, and the body's exception
    propagates.

    .. note::
        When several captures share a ``pool``, give them the same ``stream`` as
        well for the sharing to be effective.

    .. warning::
        Beta API, like :class:`torch.cuda.graph`; it may change.
    """

    default_capture_stream: Optional[torch.Stream] = None
    _side_streams: dict[int, torch.Stream] = {}

    def __init__(self, musa_graph: MUSAGraph, pool: Optional[PoolHandle] = None,
                 stream: Optional[torch.Stream] = None, capture_error_mode: str = "global"):
        self.capture_error_mode = _check_capture_error_mode(capture_error_mode)
        self.pool = _check_pool(pool)
        self.musa_graph = musa_graph
        self.capture_stream = stream if stream is not None else self._side_stream()
        from ..streams import stream as _stream_ctx

        self.stream_ctx = _stream_ctx(self.capture_stream)

    @classmethod
    def _side_stream(cls) -> torch.Stream:
        # One capture runs at a time in a process (the documented rule for graphs),
        # so the lazily created shared side streams need no locking.
        from .._core.device import current_device
        from ..streams import Stream

        index = current_device()
        default = cls.default_capture_stream
        if default is not None and default.device_index == index:
            return default
        side = cls._side_streams.get(index)
        if side is None:
            side = Stream(device=index)
            cls._side_streams[index] = side
        if default is None:
            cls.default_capture_stream = side
        return side

    def __enter__(self) -> None:
        from .._core.device import synchronize
        from ..memory import empty_cache

        synchronize()
        gc.collect()
        empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.musa_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None:
                self.musa_graph.capture_end()
            else:
                # The body failed: close the capture anyway so the stream leaves
                # capture mode, and drop whatever was half recorded (a graph missing
                # the failed part must not be replayable). Errors from that clean-up
                # must not hide the body's exception.
                try:
                    self.musa_graph.capture_end()
                except Exception:
                    pass
                try:
                    self.musa_graph.reset()
                except Exception:
                    pass
        finally:
            self.stream_ctx.__exit__(exc_type, exc, tb)
        return False


_ModuleOrCallable = Union[torch.nn.Module, Callable[..., object]]


def _autocast_cache_active() -> bool:
    try:
        enabled = torch.is_autocast_enabled("musa") or torch.is_autocast_enabled()
    except (RuntimeError, TypeError):
        enabled = torch.is_autocast_enabled()
    return bool(enabled) and torch.is_autocast_cache_enabled()


def _check_module(module: torch.nn.Module) -> None:
    if module._backward_hooks or module._forward_hooks or module._forward_pre_hooks \
            or getattr(module, "_backward_pre_hooks", None) or getattr(module, "_forward_hooks_with_kwargs", None):
        raise AssertionError(
            "make_graphed_callables: a module passed in must have no hooks registered on it at that "
            "time (registering hooks on it afterwards is fine)"
        )
    if any(b.requires_grad for b in module.buffers()):
        raise AssertionError(
            "make_graphed_callables: only a module's parameters may require grad; "
            "all of its buffers must have requires_grad=False"
        )


def _flat_sample_args(args: Any) -> tuple[Tensor, ...]:
    if not isinstance(args, tuple):
        raise AssertionError(
            f"make_graphed_callables: sample_args for a callable must be a tuple of Tensors, got {type(args).__name__}"
        )
    flat = tuple(pytree.arg_tree_leaves(*args))
    bad = [type(a).__name__ for a in flat if not isinstance(a, Tensor)]
    if bad:
        raise AssertionError(
            "make_graphed_callables: sample_args may contain only Tensors (beta API restriction); "
            f"found {', '.join(sorted(set(bad)))}"
        )
    return flat


def _grads_of(outputs, inputs, grad_outputs, allow_unused):
    """Gradients of the outputs that need grad w.r.t. the inputs that need grad (None when nothing needs grad)."""
    wanted_out = tuple(o for o in outputs if isinstance(o, Tensor) and o.requires_grad)
    wanted_in = tuple(i for i in inputs if i.requires_grad)
    if not wanted_out or not wanted_in:
        return None
    return torch.autograd.grad(outputs=wanted_out, inputs=wanted_in, grad_outputs=grad_outputs,
                               only_inputs=True, allow_unused=allow_unused)


class _Captured:
    """What one callable's forward and backward captures left behind."""

    def __init__(self, inputs: tuple[Tensor, ...], n_user_args: int, params: tuple[Tensor, ...]):
        self.inputs = inputs                    # user args then module parameters
        self.n_user_args = n_user_args
        self.params = params
        self.arg_requires_grad = tuple(t.requires_grad for t in inputs[:n_user_args])
        self.param_requires_grad = tuple(p.requires_grad for p in params)
        self.fwd = MUSAGraph()
        self.bwd = MUSAGraph()
        self.outputs: tuple = ()
        self.out_spec = None
        self.grad_outputs: tuple = ()            # static incoming-grad buffers (None where no grad flows)
        self.grad_inputs: tuple = ()             # static results of the backward, one per input (or None)


def _capture_forward(func, args, cap: _Captured, pool, mode: str) -> None:
    with graph(cap.fwd, pool=pool, capture_error_mode=mode):
        result = func(*args)
    flat, spec = pytree.tree_flatten(result)
    cap.outputs, cap.out_spec = tuple(flat), spec


def _capture_backward(cap: _Captured, pool, allow_unused: bool, mode: str) -> None:
    cap.grad_outputs = tuple(torch.empty_like(o) if isinstance(o, Tensor) and o.requires_grad else None
                             for o in cap.outputs)
    grads = None
    if any(g is not None for g in cap.grad_outputs) and any(i.requires_grad for i in cap.inputs):
        with graph(cap.bwd, pool=pool, capture_error_mode=mode):
            grads = _grads_of(cap.outputs, cap.inputs, tuple(g for g in cap.grad_outputs if g is not None),
                              allow_unused)
    # One slot per input: the captured gradient for inputs that need grad, None for the rest.
    it = iter(grads if grads is not None else ())
    cap.grad_inputs = tuple(next(it) if (grads is not None and i.requires_grad) else None for i in cap.inputs)


def _graphed_function(cap: _Captured) -> Callable[..., object]:
    """Builds the replacement callable: an autograd.Function replaying cap's graphs."""

    class GraphedCallable(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            # Parameters are the captured tensors themselves; only user args may be new.
            for static, new in zip(cap.inputs[:cap.n_user_args], inputs):
                if static.data_ptr() != new.data_ptr():
                    static.copy_(new)
            cap.fwd.replay()
            return tuple(o.detach() if isinstance(o, Tensor) else o for o in cap.outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *grads):
            if len(grads) != len(cap.grad_outputs):
                raise RuntimeError(
                    f"graphed callable: backward got {len(grads)} gradients for {len(cap.grad_outputs)} outputs"
                )
            for static, g in zip(cap.grad_outputs, grads):
                if static is None:
                    continue
                if g is None:
                    static.zero_()
                elif static.data_ptr() != g.data_ptr():
                    static.copy_(g)
            cap.bwd.replay()
            return tuple(g.detach() if g is not None else None for g in cap.grad_inputs)

    def run(*user_args):
        flat = tuple(pytree.arg_tree_leaves(*user_args))
        if len(flat) != cap.n_user_args:
            raise RuntimeError(
                f"graphed callable: called with {len(flat)} tensor arguments, captured with {cap.n_user_args}; "
                "pass arguments in the same order and structure as sample_args"
            )
        for k, (a, rg) in enumerate(zip(flat, cap.arg_requires_grad)):
            if not isinstance(a, Tensor):
                raise RuntimeError(f"graphed callable: argument {k} is a {type(a).__name__}, not a Tensor")
            if a.requires_grad != rg:
                raise RuntimeError(
                    f"graphed callable: argument {k} has requires_grad={a.requires_grad} but its sample arg had "
                    f"requires_grad={rg}; it must match the capture"
                )
        if tuple(p.requires_grad for p in cap.params) != cap.param_requires_grad:
            raise RuntimeError(
                "graphed callable: a module parameter's requires_grad changed since make_graphed_callables; "
                "it must stay as it was at capture"
            )
        out = GraphedCallable.apply(*(flat + cap.params))
        return pytree.tree_unflatten(list(out), cap.out_spec)

    return run


def _graphed_module_forward(module: torch.nn.Module, graphed: Callable, original: Callable) -> Callable:
    captured_training = module.training

    def forward(*args, **kwargs):
        # The graph holds the training-state behaviour it was captured in, and only pays off
        # when autograd is recording; otherwise run the module's own forward.
        if module.training == captured_training and torch.is_grad_enabled():
            return graphed(*args, **kwargs)
        return original(*args, **kwargs)

    return forward


def make_graphed_callables(
    callables: Union[_ModuleOrCallable, tuple[_ModuleOrCallable, ...]],
    sample_args: Union[tuple[Tensor, ...], tuple[tuple[Tensor, ...], ...]],
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: Optional[PoolHandle] = None,
    capture_error_mode: str = "global",
) -> Union[_ModuleOrCallable, tuple[_ModuleOrCallable, ...]]:
    """Return versions of modules or functions whose forward and backward each replay a MUSA graph.

    Each returned callable runs its source's forward work as one graph replay
    inside a single autograd node; that node's backward replays a second graph with
    the backward work. It is meant as a drop-in replacement inside an
    autograd-enabled training loop.

    Arguments:
        callables (nn.Module or function, or a tuple of them): what to graph. With a
            tuple, list them in the order they run in the real workload; all their
            graphs share one memory pool.
        sample_args (tuple of Tensors, or a tuple of such tuples): example arguments;
            one tuple for a single callable, one tuple per callable for a tuple.
        num_warmup_iters (int): eager forward+backward iterations run on a side
            stream before capturing (default 3).
        capture_error_mode (str): the captures' mode, as for :meth:`MUSAGraph.capture_begin`.
        allow_unused_input (bool): allow inputs that the outputs do not depend on
            (their gradient is then None); passed to :func:`torch.autograd.grad`.
        pool (optional): a pool token (:func:`torch.musa.graph_pool_handle`,
            :meth:`MUSAGraph.pool`) for the captures to share; a new one otherwise.

    For a module, its ``forward`` is replaced in place and the module returned: the
    graphs run while the module's training mode is the one it had here and grad is
    enabled; otherwise the original forward runs.

    Restrictions (the same as for ``torch.cuda.make_graphed_callables``):

    * ``sample_args`` hold only Tensors, and each one's ``requires_grad`` must be the
      one the real argument will have; real calls pass arguments in the same order
      and structure.
    * A module passed in has no hooks at that time (hooks added later are fine), only
      its parameters may require grad, and its parameters and buffers must not be
      added or removed afterwards.
    * The results do not support double backward.
    * Under autocast, the autocast cache must be disabled (``cache_enabled=False``).
    * The outputs of a graphed call live in the graph's memory: the next call
      overwrites them.

    .. warning::
        Beta API, like its CUDA counterpart; it may change.
    """
    from .._core.device import synchronize
    from ..streams import Stream, stream

    if _autocast_cache_active():
        raise RuntimeError(
            "make_graphed_callables does not support autocast's cache; use autocast(..., cache_enabled=False)"
        )

    single = not isinstance(callables, tuple)
    funcs = (callables,) if single else callables
    per_args = (sample_args,) if single else sample_args
    if not isinstance(per_args, tuple) or len(per_args) != len(funcs):
        raise AssertionError(
            "make_graphed_callables: with a tuple of callables, sample_args must be a tuple holding one "
            "tuple of Tensors per callable"
        )

    captures: list[_Captured] = []
    for func, args in zip(funcs, per_args):
        if isinstance(func, torch.nn.Module):
            _check_module(func)
            params = tuple(func.parameters())
        else:
            params = ()
        flat = _flat_sample_args(args)
        captures.append(_Captured(flat + params, len(flat), params))

    mempool = graph_pool_handle() if pool is None else _check_pool(pool)

    # Warm-up on a side stream, so lazy one-time initialisation (workspaces, autotuning,
    # first-call allocations) happens before, not inside, the captures.
    synchronize()
    with stream(Stream()):
        for func, args, cap in zip(funcs, per_args, captures):
            for _ in range(num_warmup_iters):
                outs = pytree.tree_leaves(func(*args))
                grads_out = tuple(torch.empty_like(o) for o in outs if isinstance(o, Tensor) and o.requires_grad)
                _grads_of(outs, cap.inputs, grads_out, allow_unused_input)
                del outs, grads_out
    synchronize()

    # All graphs share the pool, so capture them in the order they will replay:
    # every forward in callable order, then every backward in reverse order.
    for func, args, cap in zip(funcs, per_args, captures):
        _capture_forward(func, args, cap, mempool, capture_error_mode)
    for cap in reversed(captures):
        _capture_backward(cap, mempool, allow_unused_input, capture_error_mode)

    results: list[_ModuleOrCallable] = []
    for func, cap in zip(funcs, captures):
        graphed = _graphed_function(cap)
        if isinstance(func, torch.nn.Module):
            func.forward = _graphed_module_forward(func, graphed, func.forward)
            results.append(func)
        else:
            results.append(graphed)
    return results[0] if single else tuple(results)

