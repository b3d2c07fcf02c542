"""The one list of torch functions torch_musa wraps at run time, and how they are installed.

Each area file of this package (the package's __init__ imports them all) declares its wrappers
with ``@gate(...)``: the torch function it adapts (module and attribute path), a one-line why, and
the other modules that bind the same function by name. ``install_all()`` wraps each one when its
module loads (at once if it has), so modules torch loads lazily (Inductor, flex_attention, the
profiler's evaluators) stay unloaded.
Every wrapper carries torch's function as ``__torch_musa_wrapped__``; ``original(target)`` returns it.
"""
import functools
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from .. import _import_hooks, _version_gate


@dataclass(frozen=True)
class Gate:
    module: str  # the torch module that holds the function
    attr: str  # its path inside that module: "fn" or "Class.method"
    why: str  # one line: what torch hard-codes, and what musa gets instead
    make: Callable  # make(torch's function) -> the wrapper
    area: str  # the file of this package that holds ``make``
    aliases: Tuple[Tuple[str, str], ...] = ()  # (module, name) that bind torch's function by name
    version_gate: Optional[str] = None  # a _version_gate predicate: does this torch have the function?

    @property
    def target(self) -> str:
        return f"{self.module}.{self.attr}"

    def available(self) -> bool:
        return self.version_gate is None or bool(getattr(_version_gate, self.version_gate)())


_gates = {}  # target -> Gate
_originals = {}  # target -> torch's own function, once wrapped


def gate(module: str, attr: str, why: str, aliases=(), version_gate: Optional[str] = None):
    """Registers the decorated ``make(torch_fn) -> wrapper`` as the adapter of ``module.attr``."""
    if version_gate is not None and not callable(getattr(_version_gate, version_gate, None)):
        raise ValueError(f"gate {module}.{attr}: _version_gate has no predicate {version_gate!r}")

    def register(make):
        g = Gate(module, attr, why, make, make.__module__.rsplit(".", 1)[-1], tuple(aliases), version_gate)
        if g.target in _gates and _gates[g.target].make is not make:
            raise ValueError(f"{g.target} is wrapped twice ({_gates[g.target].area} and {g.area}); keep one")
        _gates[g.target] = g
        return make

    return register


def entries():
    """Every registered gate, in registration order (the package imports every area file)."""
    return list(_gates.values())


def original(target: str):
    """torch's own function behind the wrapper of ``target``."""
    try:
        return _originals[target]
    except KeyError:
        known = target in _gates
        raise KeyError(f"{target} is not wrapped in this process: " + (
            "its torch module has not loaded yet (import it first)" if known else
            "no gate adapts it (registry.entries() lists the targets)")) from None


def _owner(module, attr: str):
    owner = module
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part, None)
    return owner, name


def _wrap(g: Gate, module) -> None:
    owner, name = _owner(module, g.attr)
    if g.target in _originals or owner is None or not hasattr(owner, name):
        return  # installed already, or this torch lacks the function (nothing to adapt)
    torch_fn = getattr(owner, name)
    wrapper = g.make(torch_fn)
    wrapper.__torch_musa_wrapped__ = torch_fn
    _originals[g.target] = torch_fn
    setattr(owner, name, wrapper)
    for alias_module, alias_name in g.aliases:
        loaded = sys.modules.get(alias_module)
        if loaded is not None:
            _repoint(g, alias_name, loaded)


def _repoint(g: Gate, name: str, module) -> None:
    """A module that bound torch's function by name (``from x import f``) gets the wrapper."""
    torch_fn = _originals.get(g.target)
    if torch_fn is not None and getattr(module, name, None) is torch_fn:
        owner, attr = _owner(sys.modules[g.module], g.attr)
        setattr(module, name, getattr(owner, attr))


def install_all() -> None:
    """Installs every available gate (idempotent): now for loaded modules, else when they load."""
    for g in entries():
        if not g.available():
            continue
        _import_hooks.after_import(g.module, functools.partial(_wrap, g))
        for alias_module, alias_name in g.aliases:
            _import_hooks.after_import(alias_module, functools.partial(_repoint, g, alias_name))


def markdown_rows():
    """The README's table rows, one per gate: (torch function, area file, why)."""
    return [(g.target, f"gates/{g.area}.py", g.why) for g in entries()]
