"""torch.compile on musa: Dynamo's device interface and Inductor's code generation.

Nothing here is imported with torch_musa: :func:`install` arranges for the
device interface to be registered when torch._dynamo loads it, and Inductor
finds its musa backend through ``torch.musa.Scheduling`` and friends
(:mod:`torch_musa._inductor.backend`).
"""
from __future__ import annotations

from torch_musa._import_hooks import after_import

INDUCTOR_HOOK_NAMES = ("Scheduling", "PythonWrapperCodegen")


def _register_device_interface(_module) -> None:
    from . import device_interface

    device_interface.register()


def install() -> None:
    after_import("torch._dynamo.device_interface", _register_device_interface)


def device_module_attr(name: str):
    """Resolves Inductor's hook names on torch.musa (imports Inductor's codegen on first use)."""
    from . import backend

    return backend.DEVICE_MODULE_ATTRS[name]()
