"""MUSA Graph lifecycle hooks: torch.cuda.graphs' hook API (torch 2.14+) for musa graphs.

Two kinds, as in torch.cuda:

* global hooks (``register_graph_*_hook``) see every graph's capture start and end, its
  instantiation and each replay; a global hook that raises is ignored, so one consumer (a
  profiler, a checker) cannot break another's graph;
* per-graph hooks (``MUSAGraph.register_*_hook``), whose errors reach the graph's owner.

Destroy callbacks and retained objects belong to one capture cycle of a graph: they are
released when the graph is reset or garbage collected, whichever comes first. The holder
below never references the graph, so the finalizer that fires it cannot keep the graph alive.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

GraphHook = Callable[[Any], None]

_capture_start: OrderedDict[int, GraphHook] = OrderedDict()
_capture_end: OrderedDict[int, GraphHook] = OrderedDict()
_instantiate: OrderedDict[int, GraphHook] = OrderedDict()
_replay_start: OrderedDict[int, GraphHook] = OrderedDict()
_replay_end: OrderedDict[int, GraphHook] = OrderedDict()
_destroy: OrderedDict[int, Callable[[set], None]] = OrderedDict()


def add_entry(registry: OrderedDict, value: object):
    """Put ``value`` in ``registry``; the RemovableHandle returned takes it out."""
    from torch.utils.hooks import RemovableHandle

    handle = RemovableHandle(registry)
    registry[handle.id] = value
    return handle


def add_hook(registry: OrderedDict, fn: Callable):
    if not callable(fn):
        raise TypeError(f"a graph hook must be callable, got {type(fn).__name__}")
    return add_entry(registry, fn)


def run_global(registry: OrderedDict, arg) -> None:
    """Call every hook of a global registry with ``arg`` (a graph, or a destroyed graph's ids)."""
    for fn in list(registry.values()):
        try:
            fn(arg)
        except Exception:
            pass  # a global consumer's failure must not break the graph's owner


def run_own(registry: OrderedDict, graph) -> None:
    for fn in list(registry.values()):
        fn(graph)


class RetainedCallbacks:
    """One capture cycle's destroy callbacks and retained objects, fired at most once."""

    def __init__(self) -> None:
        self.callbacks: OrderedDict[int, Callable[[], None]] = OrderedDict()
        self.objects: OrderedDict[int, object] = OrderedDict()
        self.replay_streams: set = set()  # drained before firing when a caller asked for it
        self.sync_before_fire = False
        self._fired = False

    def fire(self) -> None:
        if self._fired:  # reset() and then collection must not fire twice
            return
        self._fired = True
        if self.sync_before_fire:
            for stream in self.replay_streams:
                try:
                    stream.synchronize()
                except Exception:
                    pass  # a failed sync must not skip the callbacks
        for cb in list(self.callbacks.values()):
            try:
                cb()
            except Exception:
                pass
        self.callbacks.clear()
        self.objects.clear()
        self.replay_streams.clear()


def register_graph_capture_start_hook(fn: GraphHook):
    """Run ``fn(graph)`` for every MUSA graph as its capture begins; returns a handle whose
    ``remove()`` unregisters it.

    The capture is live on the current stream while the hook runs: musa work it issues is
    captured into the graph, and under the default ``"global"`` capture error mode an unsafe
    call raises. Querying the capture state is fine."""
    return add_hook(_capture_start, fn)


def register_graph_capture_end_hook(fn: GraphHook):
    """Run ``fn(graph)`` for every MUSA graph when its capture ends, before it is
    instantiated; returns a removable handle."""
    return add_hook(_capture_end, fn)


def register_graph_instantiate_hook(fn: GraphHook):
    """Run ``fn(graph)`` for every MUSA graph right after it is instantiated; returns a
    removable handle."""
    return add_hook(_instantiate, fn)


def register_graph_replay_start_hook(fn: GraphHook):
    """Run ``fn(graph)`` at the start of every replay of every MUSA graph, just before its
    launch; returns a removable handle. Replay is the hot path: keep the hook cheap."""
    return add_hook(_replay_start, fn)


def register_graph_replay_end_hook(fn: GraphHook):
    """Run ``fn(graph)`` after every replay of every MUSA graph is enqueued (the device work
    may still be running), also when the launch raised; returns a removable handle."""
    return add_hook(_replay_end, fn)


def register_graph_destroy_hook(fn: Callable[[set], None]):
    """Run ``fn(graph_ids)`` whenever a MUSA graph is reset or destroyed; returns a removable
    handle. ``graph_ids`` is the set of kernel-annotation graph ids torch.cuda passes; musa
    graphs record no kernel annotations, so it is empty."""
    return add_hook(_destroy, fn)


__all__ = [
    "register_graph_capture_start_hook",
    "register_graph_capture_end_hook",
    "register_graph_instantiate_hook",
    "register_graph_replay_start_hook",
    "register_graph_replay_end_hook",
    "register_graph_destroy_hook",
]
