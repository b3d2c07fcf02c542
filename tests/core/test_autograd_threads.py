"""Autograd's musa device threads: the host driver keeps backward on the calling thread, and
the device threads let go of their last backward before Python finalizes.

torch stashes a Python object (a contextvars.Context) in the TLS each backward's graph task
captures; the device thread that drops the task last must do so while Python can still take
the GIL, or the process aborts at exit. torch_musa's exit hook runs a probe backward through
every musa device thread, after which no earlier graph task is held."""
import weakref

import torch

from torch_musa._core import autograd_threads as _autograd_threads


class _Stashed:
    pass


def test_drain_releases_what_the_last_backward_captured(device):
    # Right after a backward returns, its device thread may still hold the graph task (and so
    # the stashed object) for a moment; after the drain it never does.
    for _ in range(300):
        obj = _Stashed()
        ref = weakref.ref(obj)
        torch._C._stash_obj_in_tls("torch_musa_test", obj)  # captured by the next backward's graph task
        x = torch.randn(8, device=device, requires_grad=True)
        (x * 3).sum().backward()
        torch._C._stash_obj_in_tls("torch_musa_test", None)  # drops it (torch 2.11 has no _remove_obj_from_tls)
        del obj
        _autograd_threads._drain_device_threads()
        assert ref() is None
    torch.testing.assert_close(x.grad.cpu(), torch.full((8,), 3.0))


def test_probe_runs_through_every_device_thread(device, monkeypatch):
    ran = []
    real = torch.autograd.Variable._execution_engine.run_backward

    class Engine:
        def run_backward(self, *args, **kwargs):
            ran.append(args[0][0].device)
            return real(*args, **kwargs)

    monkeypatch.setattr(torch.autograd.Variable, "_execution_engine", Engine())
    _autograd_threads._drain_device_threads()
    assert ran == [torch.device("musa", i) for i in range(torch.musa.device_count())]


def test_a_process_exits_cleanly_after_backward(run_py):
    r = run_py("""
    import torch
    for d in range(torch.musa.device_count()):
        x = torch.randn(128, 128, device=f"musa:{d}", requires_grad=True)
        (x @ x).relu().sum().backward()
    print("DONE")
    """)
    assert r.returncode == 0 and "DONE" in r.stdout, r.stdout + r.stderr


def test_host_driver_runs_backward_on_the_calling_thread(device):
    """The host driver's musa backward is inline CPU work: it stays on the calling thread (no
    device-thread hand-off), with the tensor's device current inside it, as on a device thread;
    set_multithreading_enabled(True) gives it the device threads. The cuda driver keeps them."""
    import threading

    last = torch.musa.device_count() - 1
    x = torch.randn(4, device=f"musa:{last}", requires_grad=True)

    def backward_thread_and_device():
        seen = []
        y = x * 2
        y.register_hook(lambda g: seen.append((threading.get_ident(), torch.musa.current_device())))
        y.sum().backward()
        return seen[0]

    here = threading.get_ident()
    on_host = torch.musa.get_driver_name() == "host"
    thread, current = backward_thread_and_device()
    assert (thread == here) == on_host and current == last
    with torch.autograd.set_multithreading_enabled(True):
        thread, current = backward_thread_and_device()
    assert thread != here and current == last
    torch.testing.assert_close(x.grad.cpu(), torch.full((4,), 4.0))
