"""Run a function right after a torch module has executed, without importing it now.

torch_musa registers things in torch's registries (Dynamo's backends and device
interfaces) that live in heavy modules; importing them at ``import torch_musa``
would make every program pay for torch._dynamo. A meta-path finder wraps the
module's loader instead, so the registration runs the moment the module loads
(or at once, if it already has).
"""
from __future__ import annotations

import importlib.abc
import sys
import threading
import warnings
from typing import Callable, Dict, List

_pending: Dict[str, List[Callable]] = {}
_lock = threading.Lock()


def _run(fns: List[Callable], module) -> None:
    for fn in fns:
        try:
            fn(module)
        except Exception as e:  # a torch whose registry changed shape must not break the import
            warnings.warn(f"torch_musa could not register with {module.__name__}: {e}", stacklevel=3)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        # The hooks are taken when the module executes, not here: importlib.util.find_spec
        # (a version gate probing for the module) finds a spec that never loads.
        def exec_module(module):
            run_module(module)
            with _lock:
                fns = _pending.pop(fullname, None)
            if fns:
                _run(fns, module)

        spec.loader.exec_module = exec_module
        return spec


_finder = _Finder()


def after_import(module_name: str, fn: Callable) -> None:
    """Calls ``fn(module)`` once ``module_name`` has executed (now, if it already has)."""
    module = sys.modules.get(module_name)
    if module is not None:
        _run([fn], module)
        return
    with _lock:
        _pending.setdefault(module_name, []).append(fn)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
