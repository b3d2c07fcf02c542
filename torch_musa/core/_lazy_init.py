"""``torch_musa.core._lazy_init``: starting the runtime on first use (torch_musa._core.device's)."""
from .._core.device import _lazy_init, init, is_initialized  # noqa: F401


def _is_in_bad_fork() -> bool:
    """Whether this process is a child forked after musa started in its parent."""
    from .._core import device as _device

    return _device._in_bad_fork


__all__ = ["_lazy_init", "init", "is_initialized"]
