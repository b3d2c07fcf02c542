"""torch.compile on musa: Dynamo's device interface and Inductor's code generation.

Nothing here is imported with torch_musa: :func:`install` arranges for the
device interface to be registered when torch._dynamo loads it, and Inductor
finds its musa backend through ``torch.musa.Scheduling`` and friends
(:mod:`torch_musa._inductor.backend`).
"""
from __future__ import annotations

import torch

from .._import_hooks import after_import
from .devices import DEVICES  # noqa: F401  (generated wrapper code names torch.musa._inductor.DEVICES)

INDUCTOR_HOOK_NAMES = ("Scheduling", "PythonWrapperCodegen")

#: torch.musa calls Dynamo handles as it does torch.cuda's, instead of tracing into them:
#: ``stream(s)`` becomes Dynamo's stream context (it knows it from the device interface).
#: ``current_stream()`` needs nothing: while compiling it is torch.accelerator's, which Dynamo tracks.
_IN_GRAPH_CALLS = ("stream",)


def _register_device_interface(_module) -> None:
    from . import device_interface, dynamo_autocast, dynamo_device_calls

    device_interface.register()
    dynamo_autocast.register()
    _allow_stream_calls_in_graph()
    _run_rng_state_calls_eagerly()
    dynamo_device_calls.register()


def _allow_stream_calls_in_graph() -> None:
    from .. import streams

    torch.compiler.allow_in_graph([getattr(streams, name) for name in _IN_GRAPH_CALLS])


#: torch.musa's generator-state calls: like torch.cuda's, Dynamo must not trace them (a graph
#: break, then an eager call): a generator's state is not an aten op, so a traced graph could
#: not keep it right.
_RNG_STATE_CALLS = ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
                    "get_rng_state_all", "set_rng_state", "set_rng_state_all")


def _run_rng_state_calls_eagerly() -> None:
    from .. import _exports, random

    for name in _RNG_STATE_CALLS:
        _exports.rebind(random, name, torch._dynamo.disable(getattr(random, name), recursive=True))


def install() -> None:
    # The package, not torch._dynamo.device_interface: that module loads while torch._dynamo is
    # half-initialized, and allow_in_graph needs all of it.
    after_import("torch._dynamo", _register_device_interface)
    # Compile workers import torch (which autoloads torch_musa) and then Triton: the musa
    # target must be known there too, so it is registered whenever Triton loads.
    from . import triton_target

    after_import("triton", triton_target.register)
    # User kernels launched with musa tensors: on the current musa stream (cuda driver), or a
    # clear error (host driver).
    after_import("triton.runtime.jit", _user_triton("register_jit"))
    after_import("triton.runtime.autotuner", _user_triton("register_autotuner"))


def _user_triton(name: str):
    def register(module) -> None:
        from . import user_triton

        getattr(user_triton, name)(module)

    return register


def device_module_attr(name: str):
    """Resolves Inductor's hook names on torch.musa (imports Inductor's codegen on first use)."""
    from . import backend

    return backend.DEVICE_MODULE_ATTRS[name]()
