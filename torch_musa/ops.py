"""Introspection of the op layer: which ops took the copying path."""
from typing import Dict

from . import _C


def copy_path_counts() -> Dict[str, int]:
    """Ops whose outputs could not alias musa memory and were copied in, with counts."""
    return dict(_C._copy_path_counts())


def reset_copy_path_counts() -> None:
    _C._reset_copy_path_counts()


def delegated_op_count() -> int:
    """How many aten ops ran through the generic delegation since start."""
    return _C._delegated_op_count()
