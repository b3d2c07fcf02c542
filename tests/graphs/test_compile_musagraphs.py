"""torch.compile(backend="musagraphs"): forward and backward results equal eager (kept small: compiles are slow)."""
import copy
import warnings

import torch
from torch import nn


def test_musagraphs_forward_and_backward_match_eager(device):
    import torch._dynamo

    assert "musagraphs" in torch._dynamo.list_backends()
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(device)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="musagraphs")

    caught = warnings.catch_warnings(record=True)
    log = caught.__enter__()
    warnings.simplefilter("always")
    # Call 1 warms up eagerly, call 2 captures, call 3 replays; each with new data.
    for step in range(3):
        x = torch.randn(8, 16, device=device)
        out = compiled(x)
        ref = eager(x)
        assert out.device.type == "musa"
        torch.testing.assert_close(out, ref)
        out.square().mean().backward()
        ref.square().mean().backward()
        for pc, pe in zip(model.parameters(), eager.parameters()):
            torch.testing.assert_close(pc.grad, pe.grad)
        held = out.detach().clone()
        compiled(torch.randn(8, 16, device=device))  # a later replay must not overwrite `out`
        torch.testing.assert_close(out.detach(), held)
        model.zero_grad(set_to_none=True)
        eager.zero_grad(set_to_none=True)

    with torch.no_grad():  # inference graph, with its own warm-up/capture/replay
        for _ in range(3):
            x = torch.randn(8, 16, device=device)
            torch.testing.assert_close(compiled(x), eager(x))
    caught.__exit__(None, None, None)
    torch._dynamo.reset()
    fallbacks = [str(w.message) for w in log if str(w.message).startswith("musagraphs:")]
    assert not fallbacks, f"graphs were not used: {fallbacks}"


def test_import_registers_backend_lazily(run_py):
    r = run_py("""
        import sys
        import torch, torch_musa
        assert "torch._dynamo" not in sys.modules, "import torch_musa must not import torch._dynamo"
        from torch._dynamo.backends.registry import lookup_backend
        from torch_musa._dynamo_musagraphs import musagraphs
        assert lookup_backend("musagraphs") is musagraphs
        print("OK")
    """)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr


def _fx_graph(fn):
    """An FX graph x -> (fn(x * 2),) built by hand, so fn may do anything (no tracing)."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(fn, (g.call_function(torch.mul, (x, 2)),)),))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def _runner(fn):
    from torch_musa import _dynamo_musagraphs as mg

    return mg._runner_for(_fx_graph(fn), [], pools=mg._SharedPools(), kind="forward")


def test_failed_capture_falls_back_to_eager_with_one_warning(device, monkeypatch):
    from torch_musa import _dynamo_musagraphs as mg

    monkeypatch.setattr(mg, "_warned", set())

    def syncs(y):
        torch.musa.synchronize()  # not allowed while capturing: the capture fails
        return y + 1

    run = _runner(syncs)
    x = torch.ones(3, device=device)
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        for i in range(4):
            (out,) = run([x * i])
            torch.testing.assert_close(out, x * (2 * i) + 1)
    msgs = [str(w.message) for w in log if str(w.message).startswith("musagraphs:")]
    assert len(msgs) == 1 and "capture failed" in msgs[0], msgs
    assert not torch.musa.is_current_stream_capturing()
    assert torch.musa.current_stream() == torch.musa.default_stream()


def test_non_musa_inputs_run_eagerly(monkeypatch):
    from torch_musa import _dynamo_musagraphs as mg

    monkeypatch.setattr(mg, "_warned", set())
    run = _runner(torch.neg)
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        for i in range(3):
            (out,) = run([torch.full((2,), float(i))])
            assert out.device.type == "cpu"
            torch.testing.assert_close(out, torch.full((2,), -2.0 * i))
    msgs = [str(w.message) for w in log if str(w.message).startswith("musagraphs:")]
    assert len(msgs) == 1 and "cpu" in msgs[0], msgs


def test_replayed_outputs_keep_layout_and_aliasing(device):
    # Outputs that view one another (or an input) must come back as the same kind of views.
    from torch_musa import _dynamo_musagraphs as mg

    g = torch.fx.Graph()
    x = g.placeholder("x")
    h = g.call_function(torch.add, (x, 1))
    sl = g.call_method("__getitem__", (h, (slice(None), slice(1, 3))))
    tr = g.call_method("t", (h,))
    xv = g.call_method("view", (x, -1))
    g.output((h, sl, tr, xv))
    run = mg._runner_for(torch.fx.GraphModule(torch.nn.Module(), g), [], pools=mg._SharedPools(), kind="forward")
    for i in range(3):
        inp = torch.randn(4, 5, device=device)
        h_, sl_, tr_, xv_ = run([inp])
        torch.testing.assert_close(h_, inp + 1)
        assert sl_.untyped_storage().data_ptr() == h_.untyped_storage().data_ptr() == tr_.untyped_storage().data_ptr()
        assert (sl_.storage_offset(), sl_.stride(), tr_.stride()) == (1, (5, 1), (1, 5))
        assert xv_.untyped_storage().data_ptr() == inp.untyped_storage().data_ptr()
        torch.testing.assert_close(sl_, (inp + 1)[:, 1:3])
        torch.testing.assert_close(tr_, (inp + 1).t())
