"""MUSA Graph capture and replay against eager references: models forward and
whole training steps, graph-safe RNG, multi-stream capture and misuse.
Runs on the host driver in CI and with TORCH_MUSA_DRIVER=cuda on the GPU."""
import copy
import threading

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_musa

DEV = "musa"


def mlp():
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8))


def cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 8))


def transformer():
    return nn.Sequential(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), nn.Flatten(),
                         nn.Linear(6 * 32, 8))


MODELS = {
    "mlp": (mlp, (16, 32)),
    "cnn": (cnn, (4, 3, 12, 12)),
    "transformer": (transformer, (4, 6, 32)),
}


def seeded(factory, seed=0):
    torch.manual_seed(seed)
    return factory().to(DEV)


def warm_up(fn, iters=3):
    """The warm-up torch.cuda's graph docs prescribe: a few eager runs on a side stream."""
    s = torch.musa.Stream()
    s.wait_stream(torch.musa.current_stream())
    with torch.musa.stream(s):
        for _ in range(iters):
            fn()
    torch.musa.current_stream().wait_stream(s)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_replay_equals_eager(name):
    factory, shape = MODELS[name]
    model = seeded(factory).eval()
    static_x = torch.randn(shape, device=DEV)
    with torch.no_grad():
        warm_up(lambda: model(static_x))
        g = torch.musa.MUSAGraph()
        with torch.musa.graph(g):
            static_y = model(static_x)
        for _ in range(10):
            x = torch.randn(shape, device=DEV)
            static_x.copy_(x)
            g.replay()
            torch.testing.assert_close(static_y, model(x), rtol=1e-5, atol=1e-5)


OPTIMIZERS = {
    "mlp": lambda p: torch.optim.Adam(p, lr=1e-2, capturable=True),
    "cnn": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9),
    "transformer": lambda p: torch.optim.AdamW(p, lr=1e-3, capturable=True),
}
@pytest.mark.parametrize("name", sorted(MODELS))
def test_whole_training_step_replays_like_eager(name):
    """Forward, backward and optimizer.step() in one graph: 10 replays give the eager run's losses."""
    factory, shape = MODELS[name]
    graphed, eager = seeded(factory), seeded(factory)
    # The same optimizer configuration eagerly (capturable=True runs eagerly too).
    opt, eager_opt = OPTIMIZERS[name](graphed.parameters()), OPTIMIZERS[name](eager.parameters())
    data = [(torch.randn(shape, device=DEV), torch.randn(shape[0], 8, device=DEV)) for _ in range(13)]
    static_x, static_t = torch.zeros(shape, device=DEV), torch.zeros(shape[0], 8, device=DEV)

    def step(model, optimizer, x, t):
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), t)
        loss.backward()
        optimizer.step()
        return loss

    it = iter(data)
    def warm():
        x, t = next(it)
        static_x.copy_(x)
        static_t.copy_(t)
        step(graphed, opt, static_x, static_t)
    warm_up(warm)
    for x, t in data[:3]:
        step(eager, eager_opt, x, t)

    g = torch.musa.MUSAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.musa.graph(g):
        static_loss = F.mse_loss(graphed(static_x), static_t)
        static_loss.backward()
        opt.step()
    for x, t in data[3:]:
        static_x.copy_(x)
        static_t.copy_(t)
        g.replay()
        expected = step(eager, eager_opt, x, t)
        torch.testing.assert_close(static_loss, expected.detach(), rtol=1e-4, atol=1e-5)
    for p, q in zip(graphed.parameters(), eager.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4)


def test_dropout_draws_new_numbers_per_replay_and_seeding_reproduces():
    x = torch.ones(64, 64, device=DEV)
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        y = F.dropout(x, 0.5) + torch.rand(64, 64, device=DEV)
    draws = []
    for _ in range(3):
        g.replay()
        draws.append(y.clone())
    assert not torch.equal(draws[0], draws[1]) and not torch.equal(draws[1], draws[2])
    mask = draws[0] >= 1  # dropout keeps about half and scales them to 2
    assert 0.35 < mask.float().mean().item() < 0.65
    torch.musa.manual_seed(123)
    g.replay(); a1 = y.clone(); g.replay(); a2 = y.clone()
    torch.musa.manual_seed(123)
    g.replay(); b1 = y.clone(); g.replay(); b2 = y.clone()
    assert torch.equal(a1, b1) and torch.equal(a2, b2) and not torch.equal(a1, a2)


def test_dropout_in_a_graphed_training_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 1)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(128, 16, device=DEV)
    target = x.sum(1, keepdim=True)
    static_loss = None

    def step():
        nonlocal static_loss
        opt.zero_grad(set_to_none=True)
        static_loss = F.mse_loss(model(x), target)
        static_loss.backward()
        opt.step()
    warm_up(step)
    g = torch.musa.MUSAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.musa.graph(g):
        step()
    losses = []
    for _ in range(40):
        g.replay()
        losses.append(static_loss.item())
    assert len(set(losses)) == len(losses), "dropout masks repeated between replays"
    assert sum(losses[-5:]) < sum(losses[:5]), f"training did not progress: {losses}"


def test_pools_are_shared_between_graphs_and_returned_on_reset():
    x = torch.randn(256, 256, device=DEV)
    g1, g2 = torch.musa.MUSAGraph(), torch.musa.MUSAGraph()
    with torch.musa.graph(g1):
        y1 = x * 2
    with torch.musa.graph(g2, pool=g1.pool()):
        y2 = y1 + 1
    assert g2.pool() == g1.pool()
    g1.replay()
    g2.replay()
    torch.testing.assert_close(y2, x * 2 + 1)
    segments = [s for s in torch.musa.memory_snapshot() if tuple(s["segment_pool_id"]) == tuple(g1.pool())]
    assert segments, "the captures did not allocate from the graphs' private pool"

    handle = torch.musa.graph_pool_handle()
    g3, g4 = torch.musa.MUSAGraph(), torch.musa.MUSAGraph()
    with torch.musa.graph(g3, pool=handle):
        y3 = x - 1
    with torch.musa.graph(g4, pool=handle):
        y4 = y3 * 3
    assert g3.pool() == g4.pool() == tuple(handle)
    g3.replay()
    g4.replay()
    torch.testing.assert_close(y4, (x - 1) * 3)

    torch.musa.empty_cache()
    before = torch.musa.memory_reserved()
    del y1, y2, y3, y4
    for g in (g1, g2, g3, g4):
        g.reset()
    torch.musa.empty_cache()
    assert torch.musa.memory_reserved() < before, "reset() kept the graphs' pool memory"


def test_memory_freed_in_capture_is_reused_only_inside_the_pool():
    x = torch.randn(1024, device=DEV)
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        tmp = x * 3
        tmp_ptr = tmp.data_ptr()
        del tmp  # freed inside the capture: the pool may reuse it, nothing else may
        reused = x + 1
    assert reused.data_ptr() == tmp_ptr, "memory freed during capture was not reused inside the pool"
    outside = [torch.empty(1024, device=DEV) for _ in range(8)]
    assert tmp_ptr not in {t.data_ptr() for t in outside}
    g.replay()
    torch.testing.assert_close(reused, x + 1)


def test_thousand_replays_leave_memory_allocated_unchanged():
    model = seeded(mlp)
    x = torch.randn(16, 32, device=DEV)
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        y = model(x).relu().sum()
    g.replay()
    before = torch.musa.memory_allocated()
    for _ in range(1000):
        g.replay()
    torch.musa.synchronize()
    assert torch.musa.memory_allocated() == before
    torch.testing.assert_close(y, model(x).relu().sum())


def test_multi_stream_capture_forks_and_joins():
    a = torch.randn(64, 64, device=DEV)
    b = torch.randn(64, 64, device=DEV)
    side = torch.musa.Stream()
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        main = torch.musa.current_stream()
        side.wait_stream(main)  # fork: the side stream joins the capture
        with torch.musa.stream(side):
            left = a @ b
        right = a + b
        main.wait_stream(side)  # join
        out = left + right
    assert not torch.musa.is_current_stream_capturing()
    for _ in range(3):
        a.copy_(torch.randn(64, 64, device=DEV))
        g.replay()
        torch.testing.assert_close(out, a @ b + (a + b), rtol=1e-5, atol=1e-4)


def test_grad_scaler_with_a_graphed_forward_and_backward():
    """As torch.cuda documents for amp: capture forward and scaled backward, step the scaler eagerly."""
    graphed, eager = seeded(mlp), seeded(mlp)
    opt, eager_opt = torch.optim.SGD(graphed.parameters(), lr=0.1), torch.optim.SGD(eager.parameters(), lr=0.1)
    scaler, eager_scaler = torch.amp.GradScaler(DEV, init_scale=256.0), torch.amp.GradScaler(DEV, init_scale=256.0)
    data = [(torch.randn(16, 32, device=DEV), torch.randn(16, 8, device=DEV)) for _ in range(8)]
    static_x, static_t = data[0][0].clone(), data[0][1].clone()

    def fwd_bwd(model, x, t):
        loss = F.mse_loss(model(x), t)
        (scaler if model is graphed else eager_scaler).scale(loss).backward()
        return loss
    warm_up(lambda: fwd_bwd(graphed, static_x, static_t), iters=1)
    graphed.zero_grad(set_to_none=True)  # the captured backward then owns static .grad tensors
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        static_loss = fwd_bwd(graphed, static_x, static_t)
    for x, t in data:
        static_x.copy_(x)
        static_t.copy_(t)
        g.replay()  # the replayed backward overwrites the static grads
        scaler.step(opt)
        scaler.update()
        eager_opt.zero_grad(set_to_none=True)
        expected = fwd_bwd(eager, x, t)
        eager_scaler.step(eager_opt)
        eager_scaler.update()
        torch.testing.assert_close(static_loss, expected.detach(), rtol=1e-4, atol=1e-5)
    assert scaler.get_scale() == eager_scaler.get_scale()


# ---- misuse: a clear error, and the next capture works ----

def capture_then_check_usable():
    x = torch.arange(4.0, device=DEV)
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        y = x * 2
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.arange(4.0) * 2)


@pytest.mark.parametrize("misuse, expected", [
    (lambda x: x.sum().item(), "captur|synchroniz"),
    (lambda x: x.cpu(), "captur|synchroniz"),
    (lambda x: torch.musa.synchronize(), "captur"),
    (lambda x: torch.musa.current_stream().synchronize(), "captur"),
])
def test_synchronizing_calls_during_capture_fail_and_abort_cleanly(misuse, expected):
    x = torch.ones(4, device=DEV)
    g = torch.musa.MUSAGraph()
    # torch.AcceleratorError, as CUDA raises for a call a capture does not permit (a RuntimeError)
    with pytest.raises(torch.AcceleratorError if torch.musa.get_driver_name() == "host" else RuntimeError,
                       match=expected):
        with torch.musa.graph(g):
            x * 2
            misuse(x)
    assert not torch.musa.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="successful capture"):
        g.replay()
    capture_then_check_usable()


def test_event_query_during_capture_fails():
    ev = torch.musa.Event()
    g = torch.musa.MUSAGraph()
    with pytest.raises(RuntimeError):
        with torch.musa.graph(g):
            ev.record()
            ev.query()
    capture_then_check_usable()


def test_replay_before_capture_end_and_after_reset():
    g = torch.musa.MUSAGraph()
    with pytest.raises(RuntimeError, match="successful capture"):
        g.replay()
    s = torch.musa.Stream()
    x = torch.ones(4, device=DEV)
    with torch.musa.stream(s):
        g.capture_begin()
        y = x + 1
        with pytest.raises(RuntimeError, match="before capture_end"):
            g.replay()
        g.capture_end()
    g.replay()
    torch.testing.assert_close(y, x + 1)
    g.reset()
    with pytest.raises(RuntimeError, match="successful capture"):
        g.replay()
    capture_then_check_usable()


def test_capture_on_the_default_stream_is_refused():
    g = torch.musa.MUSAGraph()
    assert torch.musa.current_stream() == torch.musa.default_stream()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()
    assert not torch.musa.is_current_stream_capturing()
    capture_then_check_usable()


def test_pool_of_another_device_is_refused(two_devices):
    handle = torch.musa.graph_pool_handle()  # made on musa:0
    with torch.musa.device(1):
        g = torch.musa.MUSAGraph()
        with pytest.raises(RuntimeError, match="belongs to musa:0"):
            with torch.musa.graph(g, pool=handle):
                torch.ones(4, device="musa:1") * 2
    capture_then_check_usable()


def test_capture_error_modes_govern_other_threads():
    """An unsafe call (an event query) from another thread: refused during a global-mode
    capture, allowed during thread_local and relaxed ones (whose capture then stands)."""
    for mode, other_thread_may_query in (("global", False), ("thread_local", True), ("relaxed", True)):
        result = {}
        x = torch.ones(4, device=DEV)
        g = torch.musa.MUSAGraph()
        other = torch.musa.Stream()

        def query():
            ev = torch.musa.Event()
            ev.record(other)
            try:
                ev.query()
                result["ok"] = True
            except RuntimeError as e:
                result["ok"] = False
                result["msg"] = str(e)

        def capture():
            with torch.musa.graph(g, capture_error_mode=mode):
                y = x * 3
                t = threading.Thread(target=query)
                t.start()
                t.join()
            return y
        if other_thread_may_query:
            y = capture()
            g.replay()
            torch.testing.assert_close(y, x * 3)
        else:
            try:
                capture()  # CUDA may also invalidate the capture; either way the error names it
            except RuntimeError as e:
                assert "captur" in str(e)
        assert result["ok"] == other_thread_may_query, (mode, result)
        capture_then_check_usable()


def test_device_synchronize_from_another_thread_breaks_any_capture():
    """torch.musa.synchronize() waits for the capturing stream too: it fails, whatever the mode."""
    for mode in ("global", "thread_local", "relaxed"):
        failed = []
        g = torch.musa.MUSAGraph()
        x = torch.ones(4, device=DEV)

        def sync():
            try:
                torch.musa.synchronize()
            except RuntimeError:
                failed.append(True)
        with pytest.raises(RuntimeError, match="captur"):
            with torch.musa.graph(g, capture_error_mode=mode):
                x * 2
                t = threading.Thread(target=sync)
                t.start()
                t.join()
        assert failed == [True], mode
        capture_then_check_usable()


def test_is_current_stream_capturing():
    assert not torch.musa.is_current_stream_capturing()
    g = torch.musa.MUSAGraph()
    seen = []
    with torch.musa.graph(g):
        seen.append(torch.musa.is_current_stream_capturing())
    assert seen == [True] and not torch.musa.is_current_stream_capturing()


def test_debug_dump_writes_the_graph(tmp_path):
    g = torch.musa.MUSAGraph()
    g.enable_debug_mode()
    x = torch.ones(8, device=DEV)
    with torch.musa.graph(g):
        y = (x + 1) * 2
    path = tmp_path / "graph.dot"
    g.debug_dump(str(path))
    text = path.read_text()
    assert text.startswith("digraph")
    g.replay()
    torch.testing.assert_close(y, (x + 1) * 2)


@pytest.mark.skipif(not torch_musa._version_gate.accelerator_graph_available(),
                    reason="torch.accelerator.Graph exists from torch 2.12")
def test_torch_accelerator_graph_runs_on_musa():
    x = torch.ones(16, device=DEV)
    s = torch.Stream(DEV)
    g = torch.accelerator.Graph()
    with s, g:
        x += 1
    for _ in range(3):
        g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((16,), 4.0))  # capture itself runs nothing


@pytest.mark.skipif(torch.musa.get_driver_name() != "host", reason="the host runtime's own capture API (ctypes)")
def test_ops_refuse_a_stream_captured_through_the_runtime_directly():
    # A capture begun with the runtime's musaStreamBeginCapture (an extension's raw capture) is
    # one torch.musa.MUSAGraph does not know: ops on that stream must refuse it, and run again
    # once it ends (the per-op check skips the stream query only while nothing captures).
    import ctypes
    import os

    rt = ctypes.CDLL(os.path.join(os.path.dirname(torch_musa.__file__), "libmusart.so"))
    begin, end = rt._Z22musaStreamBeginCaptureP11MUstream_st, rt._Z20musaStreamEndCaptureP11MUstream_stPP10MUgraph_st
    destroy = rt._Z16musaGraphDestroyP10MUgraph_st
    x = torch.ones(4, device=DEV)
    side = torch.musa.Stream()
    with torch.musa.stream(side):
        assert begin(ctypes.c_void_p(side.musa_stream)) == 0
        try:
            for op in (lambda: x + 1, lambda: x.sum(), lambda: torch.mm(x.view(2, 2), x.view(2, 2))):
                with pytest.raises(RuntimeError, match="captured outside torch.musa.MUSAGraph"):
                    op()
        finally:
            graph = ctypes.c_void_p()
            assert end(ctypes.c_void_p(side.musa_stream), ctypes.byref(graph)) == 0
            destroy(graph)
        torch.testing.assert_close((x + 1).cpu(), torch.full((4,), 2.0))
    assert (x * 2).sum().item() == 8.0  # the default stream ran all along
