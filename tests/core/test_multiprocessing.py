"""musa tensors and other processes, as torch_musa programs meet them: a child forked after musa
started refuses musa (tests/core/test_env.py); a musa tensor sent through a torch.multiprocessing
queue or returned by a DataLoader worker fails at once in the receiver with the way out, never a
hang; cpu tensors keep going through as before."""
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset

TIMEOUT = 120  # spawn start-up on a 2-core CI machine; a hang would run past it


def _echo(inbox, outbox):
    for _ in range(2):
        try:
            t = inbox.get(timeout=TIMEOUT)
            outbox.put(("ok", t.tolist()))
        except RuntimeError as e:
            outbox.put(("error", str(e)))


def test_queue_delivers_cpu_tensors_and_refuses_musa_ones_at_once(device):
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_echo, args=(inbox, outbox))
    p.start()
    try:
        inbox.put(torch.arange(3.0))
        inbox.put(torch.arange(3.0, device=device))
        assert outbox.get(timeout=TIMEOUT) == ("ok", [0.0, 1.0, 2.0])
        kind, msg = outbox.get(timeout=TIMEOUT)
        assert kind == "error" and "musa tensor was sent to another process" in msg and "t.cpu()" in msg
    finally:
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill()
    assert p.exitcode == 0


class _MusaItems(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return torch.full((2,), float(i), device="musa")


def test_dataloader_worker_returning_musa_tensors_fails_clearly(device):
    loader = DataLoader(_MusaItems(), num_workers=1, multiprocessing_context="spawn", timeout=TIMEOUT)
    try:
        next(iter(loader))
        raise AssertionError("expected an error")
    except RuntimeError as e:
        assert "musa tensor was sent to another process" in str(e)
    # In the main process the same dataset works.
    assert [b.tolist() for b in DataLoader(_MusaItems(), num_workers=0)] == [[[0.0, 0.0]], [[1.0, 1.0]]]
