"""Dynamo: torch.musa's device queries and Stream/Event classes, traced as torch.cuda's are.

Dynamo knows torch.cuda's by identity, in its own tables; torch.musa's were user code to it,
and tracing into them reached the runtime's C++ bindings (a graph break, an error under
``fullgraph=True``). The same tables get torch.musa's entries:

* ``torch.musa.Stream()`` / ``torch.musa.Event()`` made inside a compiled function are
  graph-created objects (Dynamo's in-graph classes), as torch.cuda.Stream/Event;
* ``current_device()`` is folded to a constant under a guard that re-checks it on each call,
  ``device_count()``, ``is_available()`` and ``get_device_properties()`` are folded (they do
  not change in a process), as torch.cuda's;
* ``synchronize()`` is a call in the graph, as torch.cuda.synchronize;
* ``default_stream()`` breaks the graph and runs eagerly (torch.cuda.default_stream cannot be
  traced either); traced into, it would stop Dynamo with an internal error.

(torch.musa's generator-state calls break the graph as torch.cuda's do; ``stream(s)`` and
``current_stream()`` are handled in this package's ``__init__``.)
"""
from __future__ import annotations

_FOLDED_UNDER_GUARD = ("current_device",)
_FOLDED = ("current_device", "device_count", "is_available", "get_device_properties")
_IN_GRAPH = ("synchronize",)
_EAGER = ("default_stream",)


def register() -> None:
    import torch
    from torch._dynamo.variables import torch as torch_variables
    from torch._dynamo.variables.user_defined import UserDefinedClassVariable

    from .. import _exports, streams
    from .._core import device as _device

    UserDefinedClassVariable._in_graph_classes().update({streams.Stream, streams.Event})
    # get_device_properties() folds to a constant object, as torch.cuda's _CudaDeviceProperties
    from torch._dynamo.utils import common_constant_types

    common_constant_types.add(_device._MusaDeviceProperties)
    for name in _FOLDED_UNDER_GUARD:
        torch_variables.constant_fold_functions_need_guards[getattr(_device, name)] = None
    for name in _FOLDED:
        torch_variables.constant_fold_functions[getattr(_device, name)] = None
    torch.compiler.allow_in_graph([getattr(_device, name) for name in _FOLDED + _IN_GRAPH])
    for name in _EAGER:
        _exports.rebind(streams, name, torch._dynamo.disable(getattr(streams, name), recursive=True))
