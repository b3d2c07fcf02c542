"""Replacing a function everywhere torch_musa exports it.

The root (torch.musa) and torch_musa.core's paths re-export what owner modules define; code that
swaps one for a wrapper (Dynamo's eager-only calls) must swap every binding, or torch.musa.X and
torch.musa.<owner>.X would be two different objects. Loaded modules are read from sys.modules,
so no module here imports the package root.
"""
import sys


def rebind(owner, name: str, new) -> None:
    """Binds ``new`` to ``name`` in ``owner`` and in every loaded torch_musa module that re-exported
    ``owner.name``."""
    old = getattr(owner, name)
    for modname, mod in list(sys.modules.items()):
        if modname != "torch_musa" and not modname.startswith("torch_musa."):
            continue
        if getattr(mod, "__dict__", {}).get(name) is old:
            setattr(mod, name, new)
