"""musa tensors shared between processes, against what CUDA IPC gives torch.cuda users: the
receiver gets a musa tensor over the same memory (writes are seen both ways), the sender's memory
lives until every receiver released it, a receiver whose sender died gets an error, not a hang.

Spawned processes are slow to start on a 2-core machine, so one long-lived peer serves most checks.
"""
import gc
import json
import os

import pytest
import torch
import torch.multiprocessing as mp

TIMEOUT = 120
CTX = mp.get_context("spawn")
ON_CUDA = torch.musa.get_driver_name() != "host"


def _sync():
    torch.musa.synchronize()


def _peer(inbox, outbox):
    """Serves commands: ("echo", t) sends back t's values; ("add", t, v) adds v in place (the sender
    checks it sees the write); ("hold", t) / ("drop",) keep and release a tensor; ("event", e)."""
    held = None
    while True:
        msg = inbox.get(timeout=TIMEOUT)
        op = msg[0]
        if op == "stop":
            return
        if op == "echo":
            t = msg[1]
            outbox.put((t.device.type, t.dtype, tuple(t.shape), t.cpu()))
        elif op == "open_json":  # a handle from torch.musa.ipc.export_tensor, as JSON
            handle = torch.musa.ipc.MUSAIPCTensorHandle.from_dict(json.loads(msg[1]))
            with torch.musa.ipc.open_tensor(handle) as owner:
                values = owner.tensor.cpu()
                owner.tensor.mul_(-1)
                _sync()
            outbox.put((values, owner.closed))
        elif op == "storage":
            s = msg[1]
            outbox.put((type(s).__name__, s.device.type, s.nbytes(), torch.empty(0, dtype=torch.uint8,
                        device=s.device).set_(s).cpu()))
        elif op == "add":
            msg[1].add_(msg[2])
            _sync()
            outbox.put("added")
        elif op == "echo_kind":  # (nested tensors have no .shape)
            outbox.put((msg[1].device.type, msg[1].cpu()))
        elif op == "add_to_values":  # a sparse tensor's musa values, written in place
            t = msg[1]
            t._values().add_(msg[2])
            _sync()
            outbox.put("added")
        elif op == "hold":
            held = msg[1]
            outbox.put("held")
        elif op == "drop":
            held = None
            outbox.put("dropped")
        elif op == "event":
            e = msg[1]
            e.wait()
            e.synchronize()
            outbox.put((type(e).__name__, e.query(), str(e.device)))
        elif op == "send_back":
            outbox.put(torch.full((3,), 7.0, device="musa"))
            inbox.get(timeout=TIMEOUT)  # keep the sender alive until the receiver opened it


@pytest.fixture(scope="module")
def peer():
    inbox, outbox = CTX.Queue(), CTX.Queue()
    p = CTX.Process(target=_peer, args=(inbox, outbox), daemon=True)
    p.start()

    def ask(*msg):
        inbox.put(msg)
        return outbox.get(timeout=TIMEOUT)

    yield ask, inbox, outbox
    inbox.put(("stop",))
    p.join(TIMEOUT)
    if p.is_alive():
        p.kill()


def test_tensors_of_any_layout_and_dtype_arrive_as_musa_tensors(peer):
    ask = peer[0]
    base = torch.arange(24.0).reshape(4, 6)
    cases = [
        base,                                 # whole
        base[2:],                             # at an offset in its storage
        base[:, 1::2],                        # strided view
        base.t(),                             # transposed
        torch.arange(10, dtype=torch.int64),
        torch.randn(5).to(torch.bfloat16),
        torch.tensor([True, False, True]),
        torch.empty(0),                       # empty storage
    ]
    for cpu in cases:
        # The same view over a musa copy of the same storage.
        storage = torch.empty(0, dtype=cpu.dtype).set_(cpu.untyped_storage()).to("musa") \
            if cpu.numel() else torch.empty(0, device="musa")
        musa = torch.as_strided(storage, cpu.shape, cpu.stride(), cpu.storage_offset())
        device_type, dtype, shape, values = ask("echo", musa)
        assert (device_type, dtype, shape) == ("musa", cpu.dtype, tuple(cpu.shape))
        torch.testing.assert_close(values, cpu)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_sparse_and_nested_tensors_travel_as_their_shared_musa_parts(peer):
    ask = peer[0]
    dense = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 3.0]])
    sparse = dense.to_sparse().musa()
    nested = torch.nested.nested_tensor([torch.ones(2, 3), torch.zeros(1, 3)], device="musa")
    for t, flat in ((sparse, lambda x: x.to_dense()), (nested, lambda x: x.to_padded_tensor(0.0))):
        device_type, values = ask("echo_kind", t)
        assert device_type == "musa"
        torch.testing.assert_close(flat(values), flat(t).cpu())
    # A sparse tensor's parts are shared, not copied (torch rebuilds nested ones as copies, on every device).
    assert ask("add_to_values", sparse, 1.0) == "added"
    torch.testing.assert_close(sparse.to_dense().cpu(), dense + dense.ne(0).float())


def test_storages_travel_too_and_share_musa_is_share_cuda_for_musa(peer):
    ask = peer[0]
    t = torch.arange(6, dtype=torch.int16, device="musa")
    kind, device_type, nbytes, data = ask("storage", t.untyped_storage())
    assert (kind, device_type, nbytes) == ("UntypedStorage", "musa", 12)
    assert data.tolist() == list(t.cpu().numpy().view("uint8"))
    # torch.cuda's storage-sharing calls under musa's names, same tuple shape as _share_cuda_().
    shared = t.untyped_storage()._share_musa_()
    assert len(shared) == 8 and shared[0] == 0 and shared[2] == 12
    assert all(isinstance(shared[i], bytes) for i in (1, 4, 6))  # where _share_cuda_() has bytes
    torch.UntypedStorage._release_ipc_counter_musa(shared[4], shared[5])
    with pytest.raises(RuntimeError, match="only a musa storage"):
        torch.arange(3).untyped_storage()._share_musa_()
    assert not hasattr(torch.arange(3).untyped_storage(), "_share_musa") and \
        torch.UntypedStorage._share_cuda_ is not torch.UntypedStorage._share_musa_


def test_exported_handles_open_in_another_process(peer):
    ask = peer[0]
    base = torch.arange(64, dtype=torch.float16, device="musa").reshape(8, 8)
    view = base[2:6, 1:7:2]
    handle = torch.musa.ipc.export_tensor(view)
    assert (handle.dtype, handle.size, handle.stride, handle.storage_offset) == \
        (torch.float16, tuple(view.shape), view.stride(), view.storage_offset())
    assert handle.device_uuid == str(torch.musa.get_device_properties(0).uuid)
    text = json.dumps(handle.to_dict())
    assert torch.musa.ipc.MUSAIPCTensorHandle.from_dict(json.loads(text)) == handle
    expected = view.cpu()
    values, closed = ask("open_json", text)
    assert closed and torch.equal(values, expected)
    torch.testing.assert_close(view.cpu(), -expected)  # the receiver wrote this memory
    with pytest.raises(TypeError, match="torch.Tensor"):
        torch.musa.ipc.export_tensor(object())
    with pytest.raises(RuntimeError, match="MUSA tensor"):
        torch.musa.ipc.export_tensor(torch.ones(2))
    owner = torch.musa.ipc.MUSAIPCTensor(torch.ones(1))
    owner.close()
    with pytest.raises(RuntimeError, match="closed"):
        owner.tensor


def test_writes_are_seen_in_both_processes(peer):
    ask = peer[0]
    base = torch.zeros(4, 6, device="musa")
    view = base[1:3, ::2]
    assert ask("add", view, 5.0) == "added"
    expected = torch.zeros(4, 6)
    expected[1:3, ::2] = 5.0
    torch.testing.assert_close(base.cpu(), expected)   # the receiver wrote our memory
    base.fill_(2.0)
    _sync()
    torch.testing.assert_close(ask("echo", view)[3], torch.full((2, 3), 2.0))  # and reads ours


def test_sent_memory_lives_until_the_receiver_releases_it_then_ipc_collect_frees_it(peer):
    ask = peer[0]
    # earlier tests' garbage is freed before the window, not inside it
    gc.collect()
    torch.musa.synchronize()
    torch.musa.ipc_collect()
    before = torch.musa.memory_allocated()
    t = torch.full((1 << 18,), 3.0, device="musa")  # 1 MiB
    assert ask("hold", t) == "held"
    del t                                      # the receiver still holds it: not freed
    torch.musa.ipc_collect()
    assert torch.musa.memory_allocated() - before >= 1 << 20
    assert ask("drop") == "dropped"
    torch.musa.ipc_collect()
    assert torch.musa.memory_allocated() == before


def test_interprocess_events(peer):
    ask = peer[0]
    e = torch.musa.Event(interprocess=True)
    x = torch.ones(8, device="musa") * 2
    e.record()
    assert isinstance(e.ipc_handle(), bytes) and len(e.ipc_handle()) == 64
    name, done, device = ask("event", e)
    assert done is True and device == "musa:0" and name == "_InterprocessEvent"
    with pytest.raises(ValueError, match="cannot time"):
        torch.musa.Event(interprocess=True, enable_timing=True)
    with pytest.raises(RuntimeError, match="interprocess=True"):
        torch.musa.Event().ipc_handle()
    assert x.sum().item() == 16


def test_a_tensor_sent_back_to_its_sender_is_the_same_storage_and_receiving_twice_shares_one(peer):
    _, inbox, outbox = peer
    inbox.put(("send_back",))
    t = outbox.get(timeout=TIMEOUT)
    assert t.device.type == "musa" and t.tolist() == [7.0, 7.0, 7.0]
    inbox.put(("ack",))
    # Sending a tensor to ourselves through a queue gives the very storage back.
    q = CTX.Queue()
    mine = torch.arange(4.0, device="musa")
    q.put(mine)
    back = q.get(timeout=TIMEOUT)
    assert back.untyped_storage().data_ptr() == mine.untyped_storage().data_ptr()


def test_cpu_tensors_still_go_through_torchs_own_sharing(peer):
    ask = peer[0]
    cpu = torch.arange(5.0)
    device_type, _, _, values = ask("echo", cpu)
    assert device_type == "cpu" and values.tolist() == cpu.tolist()


def _send_then_exit(outbox, wait_release):
    t = torch.arange(6.0, device="musa") * 10
    outbox.put(t)
    del t
    outbox.close()
    outbox.join_thread()  # the message is in the pipe before this process goes


def test_the_sender_may_exit_while_the_receiver_holds_the_memory():
    outbox = CTX.Queue()
    p = CTX.Process(target=_send_then_exit, args=(outbox, True))
    p.start()
    t = outbox.get(timeout=TIMEOUT)
    if ON_CUDA:  # CUDA memory dies with its context: the sender waits at exit until released
        values = t.cpu()
        del t
        p.join(TIMEOUT)
    else:  # host driver: the receiver's mapping keeps the memory alive
        p.join(TIMEOUT)
        values = t.cpu()
    assert p.exitcode == 0
    assert values.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]


def _send_then_die(outbox):
    outbox.put(torch.ones(4, device="musa"))
    outbox.close()
    outbox.join_thread()
    os._exit(0)  # no clean exit: nothing waits for the receiver


def test_a_receiver_whose_sender_died_gets_an_error_not_a_hang():
    outbox = CTX.Queue()
    p = CTX.Process(target=_send_then_die, args=(outbox,))
    p.start()
    p.join(TIMEOUT)
    with pytest.raises(RuntimeError, match="has exited|cudaIpcOpenMemHandle"):
        outbox.get(timeout=TIMEOUT)
    assert torch.ones(2, device="musa").sum().item() == 2  # this process goes on


class _MusaItems(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.full((2,), float(i), device="musa")


def test_dataloader_workers_return_musa_tensors():
    loader = torch.utils.data.DataLoader(_MusaItems(), batch_size=2, num_workers=1,
                                         multiprocessing_context="spawn", timeout=TIMEOUT)
    batches = list(loader)
    assert all(b.device.type == "musa" for b in batches)
    assert [b.cpu().tolist() for b in batches] == [b.tolist() for b in
                                                   torch.utils.data.DataLoader(
                                                       [torch.full((2,), float(i)) for i in range(4)], batch_size=2)]


def _train(rank, model, data, target, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(data), target).backward()
        opt.step()
    _sync()


def test_spawned_training_updates_the_shared_model_as_training_here_would():
    # (a first matmul makes the kernel libraries' workspaces; they stay, so they come first)
    _train(0, torch.nn.Linear(4, 2).musa(), torch.randn(16, 4, device="musa"), torch.randn(16, 2, device="musa"), 1)
    torch.musa.ipc_collect()
    before = torch.musa.memory_allocated()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).musa()
    reference = torch.nn.Linear(4, 2).musa()
    reference.load_state_dict(model.state_dict())
    data, target = torch.randn(16, 4, device="musa"), torch.randn(16, 2, device="musa")
    model.share_memory()  # a no-op for musa, as for cuda: musa parameters are shareable as they are
    mp.spawn(_train, args=(model, data, target, 5), nprocs=1, join=True)
    _train(0, reference, data, target, 5)
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got, want)
    # The exited trainer released what it received, so all of it is freed here.
    del model, reference, data, target, got, want
    torch.musa.ipc_collect()
    assert torch.musa.memory_allocated() == before


_EXPANDABLE_SCRIPT = """
import torch, torch.multiprocessing as mp

def child(inbox, outbox):
    big, small = inbox.get(timeout=120)
    outbox.put((big.sum().item(), small.tolist()))
    big[-1] = -1.0                         # seen by the sender
    small.add_(1)
    torch.musa.synchronize()
    outbox.put("written")
    inbox.get(timeout=120)

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=child, args=(inbox, outbox)); p.start()
    big = torch.ones(10 << 20, device="musa")   # 40 MiB: more than one extent of the segment
    small = torch.arange(4.0, device="musa")
    inbox.put((big, small))
    total, values = outbox.get(timeout=120)
    assert total == big.numel() and values == [0.0, 1.0, 2.0, 3.0], (total, values)
    assert outbox.get(timeout=120) == "written"
    assert big[-1].item() == -1.0 and small.tolist() == [1.0, 2.0, 3.0, 4.0]
    inbox.put("done"); p.join(120)
    print("ok", p.exitcode)
"""


def test_memory_of_expandable_segments_is_shared_too(tmp_path, run_py):
    script = tmp_path / "expandable_ipc.py"
    script.write_text(_EXPANDABLE_SCRIPT)
    env = {"PYTORCH_MUSA_ALLOC_CONF": "expandable_segments:True"}
    if ON_CUDA:
        env["TORCH_MUSA_DRIVER"] = "cuda"
    r = run_py(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')", env=env)
    assert r.returncode == 0 and "ok 0" in r.stdout, r.stdout + r.stderr
