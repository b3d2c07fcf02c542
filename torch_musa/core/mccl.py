"""``torch_musa.core.mccl``: the module path Moore Threads' torch_musa programs import for mccl's
``version()``; it is ``torch_musa.mccl`` itself (``torch.musa.mccl``), not a copy."""
import sys as _sys

from .. import mccl as _mccl

_sys.modules[__name__] = _mccl
