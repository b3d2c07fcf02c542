"""``torch_musa.core``: the module paths Moore Threads' torch_musa programs import
(``torch_musa.core.memory``, ``torch_musa.core.amp.GradScaler``, ``torch_musa.core._utils``, ...).

Each is a path onto this package's own modules, not a copy: ``memory``, ``random``, ``stream``
and ``mudnn`` are the very modules ``torch.musa.memory``, ``torch.musa.random``,
``torch_musa.streams`` and ``torch.backends.mudnn``; the others re-export the functions they name.
"""
import sys as _sys

from .. import memory, random  # noqa: F401
from .. import streams as stream  # noqa: F401
from ..backends import mudnn  # noqa: F401
from . import _lazy_init as _lazy_init_module  # noqa: F401
from . import _utils, amp, device, reductions, serialization  # noqa: F401

# `import torch_musa.core.memory` (and `from torch_musa.core.stream import Stream`) find the
# package's own modules under these names.
for _name, _module in (("memory", memory), ("random", random), ("stream", stream), ("mudnn", mudnn)):
    _sys.modules[f"{__name__}.{_name}"] = _module

_lazy_init_musa = _lazy_init_module._lazy_init  # torch_musa's own alias for it

__all__ = ["amp", "device", "memory", "mudnn", "random", "reductions", "serialization", "stream"]
