"""MUSA Graphs (``torch.musa.graphs``, torch.cuda.graphs' counterpart), one package:

* ``_graphs``: :class:`MUSAGraph`, :class:`graph`, :func:`make_graphed_callables` and helpers;
* ``lifecycle``: torch 2.14+'s global and per-graph hooks (also ``torch_musa._graph_lifecycle``);
* ``dynamo_backend``: the ``"musagraphs"`` torch.compile backend (also ``torch_musa._dynamo_musagraphs``);
* ``torch_musa.musa_graph`` is this package under torch_musa's module path.
"""
import sys as _sys

from .. import _version_gate
from . import dynamo_backend, lifecycle  # noqa: F401  (cheap: neither imports torch._dynamo)
from ._graphs import *  # noqa: F401,F403
from ._graphs import CAPTURE_ERROR_MODES, PoolHandle, __all__  # noqa: F401

# The modules' earlier paths, and torch_musa's own (torch_musa.musa_graph[.graphs]), stay importable.
for _alias, _module in (("torch_musa._graph_lifecycle", lifecycle), ("torch_musa._dynamo_musagraphs", dynamo_backend),
                        ("torch_musa.musa_graph", _sys.modules[__name__]),
                        ("torch_musa.musa_graph.graphs", _sys.modules[__name__])):
    _sys.modules.setdefault(_alias, _module)


def update_musa_graph_with_profile() -> None:
    """torch_musa re-instantiates its graphs so that a profiler sees their kernels. Here every
    replay is already a profiled device event (torch.profiler's PrivateUse1 activity), so no
    graph needs re-instantiating; kept so torch_musa programs that call it run unchanged."""


def __getattr__(name):
    err = _version_gate.unsupported_graph_api("torch.musa", name)
    if err is not None:
        raise err
    raise AttributeError(f"module 'torch_musa.graphs' has no attribute '{name}'")
