"""Autograd's musa device threads: the host driver's backward stays on the calling thread, and
the device threads let go of their last backward before Python finalizes.

On the host driver a musa backward is CPU work that runs inline, as a CPU backward is, so the
engine's hand-off to a device thread buys no overlap and costs two thread wake-ups per backward
(a tiny forward+backward took 249 us against the CPU's 34 us on a 2-core machine). The thread
that starts the host runtime (normally the main thread) runs its backward passes itself, as
``torch.autograd.set_multithreading_enabled(False)`` makes torch do; ``with
torch.autograd.set_multithreading_enabled(True):`` gives a backward the device threads again.
The cuda driver keeps torch's device threads, as CUDA does.

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

from .. import _C
from . import device as _device


def _drain_device_threads() -> None:
    try:
        if not _device.is_initialized() or _device._in_bad_fork or _C._in_bad_fork():
            return
        engine = torch.autograd.Variable._execution_engine
        # (through the device threads even where the host driver keeps backward on this thread)
        with torch.enable_grad(), torch.autograd.set_multithreading_enabled(True):
            for index in range(_device.device_count()):
                x = torch.zeros(1, device=torch.device("musa", index), requires_grad=True)
                out = (x * 1).sum()
                engine.run_backward((out,), (torch.ones_like(out),), False, False, (),
                                    allow_unreachable=True, accumulate_grad=True)
    except Exception:
        pass  # best effort: exiting must not fail because of it


def backward_on_calling_thread() -> None:
    """The host driver's choice (see above), for the thread that starts the runtime."""
    torch._C._set_multithreading_enabled(False)


def install() -> None:
    atexit.register(_drain_device_threads)
    if _device.get_driver_name() == "host":
        _device._on_first_init(backward_on_calling_thread)
