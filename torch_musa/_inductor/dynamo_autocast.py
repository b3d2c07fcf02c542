"""Dynamo: ``torch.musa.amp.autocast(...)`` traced as one autocast region, as torch.cuda.amp.autocast is.

Dynamo knows torch.cuda.amp.autocast and torch.cpu.amp.autocast by identity: calling one gives
its AutocastModeVariable, which puts a single ``_enter_autocast``/``_exit_autocast`` pair in the
graph. Any other class is user code to Dynamo, so it traced into torch.musa.amp.autocast's
``__init__`` and ``__enter__`` (availability checks and eight autocast-state calls in the graph).
Here the class gets a variable of its own through Dynamo's dispatch-by-identity table: calling
it makes the same AutocastModeVariable that ``torch.autocast("musa", ...)`` makes.
``torch.autocast("musa")`` and instances made outside the compiled function need nothing: Dynamo
handles any torch.amp.autocast and any autocast instance.
"""
from __future__ import annotations

import inspect

from torch._dynamo.variables.ctx_manager import AutocastModeVariable
from torch._dynamo.variables.torch import TorchCtxManagerClassVariable

# torch.amp.autocast's argument order, which AutocastModeVariable keeps.
_AUTOCAST_ARGS = ("dtype", "enabled", "cache_enabled")


class MusaAutocastClassVariable(TorchCtxManagerClassVariable):
    """torch.musa.amp.autocast itself (the class) while Dynamo traces."""

    def call_function(self, tx, args, kwargs):
        bound = inspect.signature(self.value).bind(*args, **kwargs)
        bound.apply_defaults()
        values = [_constant(bound.arguments[name]) for name in _AUTOCAST_ARGS]
        return AutocastModeVariable(["musa", *values], initial_values=None)


def _constant(value):
    return value.as_python_constant() if hasattr(value, "as_python_constant") else value


def register() -> None:
    from torch._dynamo.variables.builder import VariableBuilder

    from ..amp import autocast

    VariableBuilder._id_dispatch()[id(autocast)] = \
        lambda builder, value: MusaAutocastClassVariable.create_with_source(value, source=builder.source)
