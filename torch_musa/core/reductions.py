"""``torch_musa.core.reductions``: how musa events cross process boundaries (ForkingPickler).
torch_musa.ipc.reducers installs these, with the tensor and storage reducers, at import."""
from multiprocessing.reduction import ForkingPickler

from ..ipc.reducers import _rebuild_event as rebuild_event  # noqa: F401
from ..ipc.reducers import _reduce_event as reduce_event  # noqa: F401


def init_reductions() -> None:
    """Registers the musa event reducer with ForkingPickler (done at import; idempotent)."""
    from ..streams import Event

    ForkingPickler.register(Event, reduce_event)


__all__ = ["rebuild_event", "reduce_event", "init_reductions"]
