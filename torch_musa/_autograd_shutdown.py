"""Let autograd's device threads let go of their last backward before Python finalizes.

torch's ``_engine_run_backward`` stashes a ``contextvars.Context`` in the calling thread's
TLS, and the backward's graph task captures that TLS. The caller erases its own reference
right after the backward returns, so the graph task's copy is the last one. The device
thread drops it when it next finishes a loop iteration. If Python has begun finalizing by
then, dropping the Context takes the GIL, and a thread that does so during finalization exits,
aborting the process ("terminate called without an active exception"). This is torch's race
(CUDA's device threads share it) and it shows on loaded machines.

At exit, one tiny backward per musa device, run through the engine directly (nothing stashed,
so its own graph task holds no Python object), goes through each device thread. A device
thread runs its tasks in order, so once the probe has run, every earlier graph task has been
dropped, while Python can still take the decref.
"""
import atexit

import torch


def _drain_device_threads() -> None:
    from . import _C, _device

    try:
        if not _device.is_initialized() or _device._in_bad_fork or _C._in_bad_fork():
            return
        engine = torch.autograd.Variable._execution_engine
        with torch.enable_grad():  # a script may have turned grad off globally
            for index in range(_device.device_count()):
                x = torch.zeros(1, device=torch.device("musa", index), requires_grad=True)
                out = (x * 1).sum()
                engine.run_backward((out,), (torch.ones_like(out),), False, False, (),
                                    allow_unreachable=True, accumulate_grad=True)
    except Exception:
        pass  # best effort: exiting must not fail because of it


def install() -> None:
    atexit.register(_drain_device_threads)
