"""musa tensors sent between processes (torch.multiprocessing queues and pipes, DataLoader
workers): refused with a clear error in the receiving process, never a hang.

torch pickles tensors for another process through ForkingPickler's reducers. For a musa tensor
the stock CPU path would try to share memory the receiver cannot map, and a queue's feeder thread
would drop the item, leaving the receiver waiting forever. Sharing musa memory across processes
(CUDA IPC's counterpart) is not supported yet, so a musa tensor or storage pickles into a marker
whose unpickling raises, and the receiver's get() fails at once with the way out.
"""
from multiprocessing.reduction import ForkingPickler

import torch

_MESSAGE = (
    "a musa tensor was sent to another process (torch.multiprocessing queue or pipe, DataLoader "
    "worker, ...), and sharing musa memory between processes is not supported yet; send a cpu "
    "tensor (t.cpu()) and move it to musa in the receiving process"
)


def _refused(message: str):
    raise RuntimeError(message)


def _is_musa(obj) -> bool:
    if isinstance(obj, torch.TypedStorage):
        obj = obj._untyped_storage  # (its .device would warn that TypedStorage is deprecated)
    device = getattr(obj, "device", None)
    return isinstance(device, torch.device) and device.type == "musa"


def _guard(reducer):
    def reduce(obj):
        if _is_musa(obj):
            return _refused, (_MESSAGE,)
        return reducer(obj)
    return reduce


def install() -> None:
    """Wraps torch's tensor and storage reducers (registered when torch.multiprocessing loads)."""
    import torch.multiprocessing.reductions  # noqa: F401  (registers torch's reducers first)

    table = ForkingPickler._extra_reducers
    for cls in [torch.Tensor, torch.nn.parameter.Parameter, torch.UntypedStorage, torch.TypedStorage]:
        reducer = table.get(cls)
        if reducer is not None and not getattr(reducer, "_musa_guard", False):
            guarded = _guard(reducer)
            guarded._musa_guard = True
            ForkingPickler.register(cls, guarded)
