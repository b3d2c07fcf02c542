"""torch.musa.amp.autocast under Dynamo: one autocast region in the graph, as torch.cpu/cuda.amp.autocast."""
import pytest
import torch


def _graph_ops(fn, x):
    """The call nodes of the one graph Dynamo captures for fn(x), and fn's compiled result."""
    graphs = []

    def capture(gm, _example_inputs):
        graphs.append(gm)
        return gm

    torch._dynamo.reset()
    out = torch.compile(fn, backend=capture, fullgraph=True)(x)
    assert len(graphs) == 1
    return [n for n in graphs[0].graph.nodes if n.op.startswith("call")], out


def _region(autocast_cls):
    def fn(x):
        with autocast_cls(dtype=torch.bfloat16):
            y = torch.mm(x, x)
        return y.relu()

    return fn


@pytest.mark.parametrize("make", [
    lambda: torch.musa.amp.autocast,
    lambda: lambda **kw: torch.autocast("musa", **kw),
    lambda: lambda **kw: torch.amp.autocast("musa", **kw),
], ids=["musa.amp", "torch.autocast", "torch.amp.autocast"])
def test_autocast_is_one_region_like_cpu_amp(make):
    x = torch.randn(8, 8)
    # Reference: Dynamo's own handling of torch.cpu.amp.autocast (enter, mm, exit, relu).
    ref_ops, _ = _graph_ops(_region(torch.cpu.amp.autocast), x)
    ops, out = _graph_ops(_region(make()), x.musa())
    assert [n.target for n in ops] == [n.target for n in ref_ops]
    enter = ops[0]
    assert enter.target is torch.amp.autocast_mode._enter_autocast
    assert enter.args[:3] == ("musa", torch.bfloat16, True)
    eager = _region(make())(x.musa())
    assert out.dtype == eager.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), eager.cpu())
    torch._dynamo.reset()


def test_autocast_arguments_positional_and_disabled():
    def fn(x):
        with torch.musa.amp.autocast(False):  # enabled=False: matmul stays float32
            a = torch.mm(x, x)
        with torch.musa.amp.autocast(True, torch.float16, False):
            b = torch.mm(x, x)
        return a, b

    x = torch.randn(4, 4, device="musa")
    ops, (a, b) = _graph_ops(fn, x)
    enters = [n.args for n in ops if n.target is torch.amp.autocast_mode._enter_autocast]
    assert enters == [("musa", torch.float16, False, True), ("musa", torch.float16, True, False)]
    assert (a.dtype, b.dtype) == (torch.float32, torch.float16)
    ea, eb = fn(x)
    torch.testing.assert_close((a.cpu(), b.cpu()), (ea.cpu(), eb.cpu()))
    torch._dynamo.reset()
