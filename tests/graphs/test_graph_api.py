"""MUSA Graph API: torch.cuda.graphs' names and signatures on torch.musa, and capture/replay
of real work matching eager results."""
import inspect

import pytest
import torch
import torch.cuda.graphs as cuda_graphs

import torch_musa

# torch.cuda names whose musa spelling differs, and CUDA-only extras with no musa meaning
# (raw cudaGraph_t handles, cuda.bindings introspection, CUDA-only debugging aids).
RENAMED = {"CUDAGraph": "MUSAGraph", "cuda_graph": "musa_graph"}
CUDA_ONLY_METHODS = {"raw_cuda_graph", "raw_cuda_graph_exec", "get_graph_data"}
CUDA_ONLY_PARAMS = {"enable_annotations", "check_input_liveness"}
# What the installed torch's torch.cuda graph API has that torch.musa does not provide yet (the
# version module lists it; using one raises an error naming it).
NOT_YET_FUNCS, NOT_YET_METHODS, NOT_YET_PARAMS = torch_musa._version_gate.cuda_graph_api_not_mirrored()


def _public_methods(cls):
    return {n for n, v in inspect.getmembers(cls) if not n.startswith("_") and callable(v)}


def _params(fn):
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]


# Parameters newer torches added that torch.musa has on every torch (older torch.cuda lacks them).
NEWER_PARAMS = {"verbose", "capture_error_mode"}


def _assert_signature_matches(musa_fn, cuda_fn):
    """Same parameters, order and defaults as torch.cuda's, less its CUDA-only extras; musa may
    have, last, parameters that only newer torches have."""
    want = [(RENAMED.get(p.name, p.name), p.default, p.kind)
            for p in _params(cuda_fn) if p.name not in CUDA_ONLY_PARAMS | NOT_YET_PARAMS]
    got = [(p.name, p.default, p.kind) for p in _params(musa_fn)]
    extra = got[len(want):]
    assert got[:len(want)] == want and all(name in NEWER_PARAMS for name, _, _ in extra), \
        f"{musa_fn.__qualname__}: {got} != {want}"


def test_module_level_names_mirror_torch_cuda():
    for name in cuda_graphs.__all__:
        musa_name = RENAMED.get(name, name)
        if name in NOT_YET_FUNCS:
            with pytest.raises(AttributeError, match=f"torch.musa.{name}: .*not provide it yet"):
                getattr(torch.musa, name)
            continue
        assert hasattr(torch.musa, musa_name), f"torch.musa.{musa_name} missing (torch.cuda.{name} exists)"
        assert musa_name in torch.musa.__all__
        assert hasattr(torch.musa.graphs, musa_name)
        assert getattr(torch.musa, musa_name) is getattr(torch.musa.graphs, musa_name)


def test_musagraph_methods_mirror_cudagraph():
    musa = _public_methods(torch.musa.MUSAGraph)
    cuda = _public_methods(torch.cuda.CUDAGraph) - CUDA_ONLY_METHODS
    for name in NOT_YET_METHODS & cuda:
        with pytest.raises(AttributeError, match=f"MUSAGraph.{name}: .*not provide it yet"):
            getattr(torch.musa.MUSAGraph(), name)
    cuda -= NOT_YET_METHODS
    assert cuda <= musa, f"missing on MUSAGraph: {sorted(cuda - musa)}"
    for name in sorted(cuda):
        try:  # methods of a CUDA build's C++ base have no Python signature to compare with
            inspect.signature(getattr(torch.cuda.CUDAGraph, name))
        except ValueError:
            continue
        _assert_signature_matches(getattr(torch.musa.MUSAGraph, name), getattr(torch.cuda.CUDAGraph, name))
    assert issubclass(torch.musa.MUSAGraph, torch.musa._C._graphs._MUSAGraph)


def test_signatures_mirror_torch_cuda():
    _assert_signature_matches(torch.musa.graph.__init__, torch.cuda.graph.__init__)
    _assert_signature_matches(torch.musa.make_graphed_callables, torch.cuda.make_graphed_callables)
    _assert_signature_matches(torch.musa.graph_pool_handle, torch.cuda.graph_pool_handle)
    _assert_signature_matches(torch.musa.is_current_stream_capturing, torch.cuda.is_current_stream_capturing)
    assert hasattr(torch.musa.graph, "default_capture_stream")
    for obj in (torch.musa.MUSAGraph, torch.musa.graph, torch.musa.make_graphed_callables,
                torch.musa.graph_pool_handle, torch.musa.is_current_stream_capturing):
        assert inspect.getdoc(obj), f"{obj} has no docstring"


def test_pool_handles_are_tuples():
    h = torch.musa.graph_pool_handle()
    assert isinstance(h, tuple) and len(h) == 2 and all(isinstance(x, int) for x in h)
    assert torch.musa.graph_pool_handle() != h


@pytest.mark.parametrize("mode", ["bogus", "", "GLOBAL", None, 1])
def test_bad_capture_error_mode(mode):
    g = torch.musa.MUSAGraph()
    s = torch.musa.Stream()
    with torch.musa.stream(s):
        with pytest.raises(ValueError, match="'global', 'thread_local', 'relaxed'"):
            g.capture_begin(capture_error_mode=mode)
        assert not torch.musa.is_current_stream_capturing()
    with pytest.raises(ValueError, match="'global', 'thread_local', 'relaxed'"):
        torch.musa.graph(g, capture_error_mode=mode)
    assert torch.musa.current_stream() == torch.musa.default_stream()


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_capture_error_modes_capture(device, mode):
    x = torch.arange(8.0, device=device)
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g, capture_error_mode=mode):
        y = x * 2 + 1
    x.copy_(torch.full((8,), 3.0))
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((8,), 7.0))


def test_capturing_flag_and_stream_inside_context(device):
    g = torch.musa.MUSAGraph()
    x = torch.ones(4, device=device)
    before = torch.musa.current_stream()
    assert not torch.musa.is_current_stream_capturing()
    with torch.musa.graph(g):
        assert torch.musa.is_current_stream_capturing()
        inside = torch.musa.current_stream()
        y = x + 1
    assert inside != torch.musa.default_stream()
    assert inside == torch.musa.graph.default_capture_stream
    assert not torch.musa.is_current_stream_capturing()
    assert torch.musa.current_stream() == before
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((4,), 2.0))


def test_capture_on_given_stream_and_shared_pool(device):
    s = torch.musa.Stream()
    x = torch.zeros(16, device=device)
    g1, g2 = torch.musa.MUSAGraph(), torch.musa.MUSAGraph()
    with torch.musa.graph(g1, stream=s):
        assert torch.musa.current_stream() == s
        y = x + 1
    assert isinstance(g1.pool(), tuple)
    with torch.musa.graph(g2, pool=g1.pool(), stream=s):
        z = y * 3
    for v in (1.0, 5.0, -2.0):
        x.fill_(v)
        g1.replay()
        g2.replay()
        torch.testing.assert_close(z.cpu(), torch.full((16,), (v + 1) * 3))


def test_mlp_forward_replay_matches_eager(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
        torch.nn.Linear(64, 10),
    ).to(device)
    static_x = torch.randn(8, 32, device=device)
    # Warm up on a side stream first, as for CUDA graphs.
    side = torch.musa.Stream()
    side.wait_stream(torch.musa.current_stream())
    with torch.no_grad(), torch.musa.stream(side):
        for _ in range(2):
            model(static_x)
    torch.musa.current_stream().wait_stream(side)

    g = torch.musa.MUSAGraph()
    with torch.no_grad(), torch.musa.graph(g):
        static_y = model(static_x)

    for _ in range(10):
        x = torch.randn(8, 32, device=device)
        static_x.copy_(x)
        g.replay()
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(static_y, expected)


def test_replay_draws_new_random_numbers(device):
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        r = torch.rand(1000, device=device)
    g.replay()
    first = r.clone()
    g.replay()
    assert not torch.equal(first, r)
    assert 0.0 <= float(r.min()) and float(r.max()) < 1.0


def test_keep_graph_instantiate_reset_recapture(device):
    x = torch.ones(4, device=device)
    g = torch.musa.MUSAGraph(keep_graph=True)
    with torch.musa.graph(g):
        y = x * 5
    g.instantiate()
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((4,), 5.0))
    g.reset()
    with torch.musa.graph(g):
        z = x - 3
    x.fill_(10.0)
    g.replay()
    torch.testing.assert_close(z.cpu(), torch.full((4,), 7.0))


def test_manual_capture_begin_end(device):
    x = torch.ones(4, device=device)
    g = torch.musa.MUSAGraph()
    s = torch.musa.Stream()
    torch.musa.synchronize()
    with torch.musa.stream(s):
        g.capture_begin(pool=torch.musa.graph_pool_handle(), capture_error_mode="relaxed")
        y = x.sum()
        g.capture_end()
    x.fill_(2.0)
    g.replay()
    assert float(y) == 8.0


def test_error_in_body_propagates_and_next_capture_works(device):
    x = torch.ones(4, device=device)
    g = torch.musa.MUSAGraph()
    prev = torch.musa.current_stream()
    with pytest.raises(KeyError, match="from the body"):
        with torch.musa.graph(g):
            x + 1
            raise KeyError("from the body")
    assert not torch.musa.is_current_stream_capturing()
    assert torch.musa.current_stream() == prev
    g2 = torch.musa.MUSAGraph()
    with torch.musa.graph(g2):
        y = x * 4
    g2.replay()
    torch.testing.assert_close(y.cpu(), torch.full((4,), 4.0))
