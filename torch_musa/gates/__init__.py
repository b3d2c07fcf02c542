"""Run-time wrappers ("gates") around torch Python functions that hard-code a device list or call
CUDA-only torch._C functions with no dispatch point. Each changes behaviour for musa arguments only;
every other call reaches torch's own function untouched. One file per torch area, each registering
its gates; registry.py lists them all (the README's table is tested against it) and installs them."""
# Importing an area file registers its gates (this order is the registry's and the README's).
from . import data_parallel, flex_attention, profiler, c10d, ddp_hooks, graph_trees  # noqa: F401
from . import inductor_graph, tensor_types, amp  # noqa: F401
from .registry import entries, install_all, original  # noqa: F401
