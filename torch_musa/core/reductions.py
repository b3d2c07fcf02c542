"""``torch_musa.core.reductions``: how musa events cross process boundaries (ForkingPickler).
torch_musa._multiprocessing installs these, with the tensor and storage reducers, at import."""
from multiprocessing.reduction import ForkingPickler

from .._multiprocessing import _rebuild_event as rebuild_event  # noqa: F401
from .._multiprocessing import _reduce_event as reduce_event  # noqa: F401


def init_reductions() -> None:
    """Registers the musa event reducer with ForkingPickler (done at import; idempotent)."""
    from ..streams import Event

    ForkingPickler.register(Event, reduce_event)


__all__ = ["rebuild_event", "reduce_event", "init_reductions"]
