"""Introspection of the op layer: which ops took the copying path, and which ran widened."""
from typing import Dict

from . import _C


def copy_path_counts() -> Dict[str, int]:
    """Ops whose outputs could not alias musa memory and were copied in, with counts."""
    return dict(_C._copy_path_counts())


def reset_copy_path_counts() -> None:
    _C._reset_copy_path_counts()


def widened_op_counts() -> Dict[str, int]:
    """Ops the kernel device had no kernel for in their dtype (float16 ``ctc_loss`` on the host
    driver, ``histc`` on integers, ...), which therefore ran in a wider dtype (float32 for
    half/bfloat16, float64 for integers) with results cast back, with counts."""
    return dict(_C._widened_op_counts())


def reset_widened_op_counts() -> None:
    _C._reset_widened_op_counts()


def delegated_op_count() -> int:
    """How many aten ops ran through the generic delegation since start."""
    return _C._delegated_op_count()
