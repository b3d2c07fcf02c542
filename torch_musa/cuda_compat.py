"""``torch_musa.cuda_compat``: the public path of :mod:`torch_musa.utils.cuda_compat` (the porting
tools live in utils/). The path is that very module, not a copy of its names, so the two paths
share every object and a patch through either one is seen by both."""
import sys

from .utils import cuda_compat as _owner

sys.modules[__name__] = _owner
