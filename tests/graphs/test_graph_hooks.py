"""MUSA Graph lifecycle hooks, destroy callbacks, retained objects and the split capture_end:
torch.cuda.graphs' API of torch 2.14/2.15 (provided on every torch), with its documented
semantics: global hooks before the graph's own, capture-end before instantiate, replay hooks
around each launch, global hook errors ignored and a graph's own raised, destroy callbacks
once per capture cycle, on reset or collection."""
import gc
import weakref

import pytest
import torch

HOOKS = ("capture_start", "capture_end", "instantiate", "replay_start", "replay_end")


@pytest.fixture(autouse=True)
def collect_graph_cycles():
    """Hooks that record their graph make reference cycles; collect them here, so their graphs'
    memory is not freed in the middle of a later test's memory accounting."""
    yield
    gc.collect()


def _register_all(g, events):
    """Global and per-graph hooks for every lifecycle step, each appending its name."""
    handles = []
    for step in HOOKS:
        register_global = getattr(torch.musa, f"register_graph_{step}_hook")
        handles.append(register_global(lambda graph, step=step: events.append(("global", step, graph))))
        own = "post_instantiate" if step == "instantiate" else step
        handles.append(getattr(g, f"register_{own}_hook")(lambda graph, step=step: events.append(("own", step, graph))))
    return handles


def test_hooks_run_in_lifecycle_order(device):
    x = torch.arange(6.0, device=device)
    g = torch.musa.MUSAGraph()
    events = []
    handles = _register_all(g, events)
    try:
        with torch.musa.graph(g):
            y = x * 2
        assert [(who, step) for who, step, _ in events] == [
            ("global", "capture_start"), ("own", "capture_start"), ("global", "capture_end"), ("own", "capture_end"),
            ("global", "instantiate"), ("own", "instantiate")]
        assert all(graph is g for _, _, graph in events)
        events.clear()
        for v in (1.0, 4.0):
            x.fill_(v)
            g.replay()
            torch.testing.assert_close(y.cpu(), torch.full((6,), 2 * v))
        assert [(who, step) for who, step, _ in events] == [
            ("global", "replay_start"), ("own", "replay_start"), ("global", "replay_end"), ("own", "replay_end")] * 2
    finally:
        for h in handles:
            h.remove()
    events.clear()
    g.replay()
    assert events == []  # removed hooks no longer run


def test_kept_graph_runs_instantiate_hooks_at_first_replay_and_each_instantiate(device):
    x = torch.ones(4, device=device)
    g = torch.musa.MUSAGraph(keep_graph=True)
    seen = []
    g.register_post_instantiate_hook(lambda graph: seen.append("instantiate"))
    g.register_capture_end_hook(lambda graph: seen.append("capture_end"))
    with torch.musa.graph(g):
        y = x + 1
    assert seen == ["capture_end"]
    g.replay()
    g.replay()
    assert seen == ["capture_end", "instantiate"]
    g.instantiate()
    assert seen == ["capture_end", "instantiate", "instantiate"]
    torch.testing.assert_close(y.cpu(), torch.full((4,), 2.0))


def test_capture_start_hook_runs_inside_the_capture(device):
    counter = torch.zeros(1, device=device)
    g = torch.musa.MUSAGraph()
    inside = []

    def hook(graph):
        inside.append(torch.musa.is_current_stream_capturing())
        counter.add_(1)  # musa work a start hook issues is captured into the graph

    g.register_capture_start_hook(hook)
    with torch.musa.graph(g):
        out = counter * 10
    assert inside == [True]
    assert counter.item() == 0  # captured, not run
    g.replay()
    g.replay()
    assert counter.item() == 2 and out.item() == 20


def test_global_hook_errors_are_ignored_and_own_hook_errors_raised(device):
    x = torch.ones(3, device=device)

    def broken(graph):
        raise RuntimeError("global consumer bug")

    handles = [torch.musa.register_graph_capture_start_hook(broken), torch.musa.register_graph_replay_start_hook(broken)]
    try:
        g = torch.musa.MUSAGraph()
        with torch.musa.graph(g):
            y = x + 1
        g.replay()  # the global hooks' errors do not reach the graph
        torch.testing.assert_close(y.cpu(), torch.full((3,), 2.0))
    finally:
        for h in handles:
            h.remove()

    g2 = torch.musa.MUSAGraph()
    g2.register_capture_start_hook(lambda graph: (_ for _ in ()).throw(ValueError("own hook")))
    with pytest.raises(ValueError, match="own hook"):
        with torch.musa.graph(g2):
            pass
    # The failed capture was abandoned: the stream captures again, and work runs eagerly.
    assert not torch.musa.is_current_stream_capturing()
    g3 = torch.musa.MUSAGraph()
    with torch.musa.graph(g3):
        z = x * 5
    g3.replay()
    torch.testing.assert_close(z.cpu(), torch.full((3,), 5.0))


def test_replay_start_hook_error_cancels_the_launch(device):
    x = torch.ones(4, device=device)
    g = torch.musa.MUSAGraph()
    with torch.musa.graph(g):
        y = x * 3
    g.replay()
    ends = []
    g.register_replay_end_hook(lambda graph: ends.append(1))
    h = g.register_replay_start_hook(lambda graph: (_ for _ in ()).throw(RuntimeError("stop")))
    x.fill_(5.0)
    with pytest.raises(RuntimeError, match="stop"):
        g.replay()
    torch.musa.synchronize()
    torch.testing.assert_close(y.cpu(), torch.full((4,), 3.0))  # not launched
    assert ends == []
    h.remove()
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((4,), 15.0))
    assert ends == [1]


class _Token:
    pass


def test_destroy_callbacks_and_retained_objects_are_released_once_per_capture_cycle(device):
    x = torch.ones(2, device=device)
    destroyed, global_ids = [], []
    gh = torch.musa.register_graph_destroy_hook(lambda ids: global_ids.append(set(ids)))
    try:
        g = torch.musa.MUSAGraph()
        with torch.musa.graph(g):
            y = x + 1
        g.register_destroy_callback(lambda: destroyed.append("cycle 1"))
        kept, dropped = _Token(), _Token()
        kept_ref, dropped_ref = weakref.ref(kept), weakref.ref(dropped)
        g.retain_object(kept)
        g.retain_object(dropped).remove()  # let go early
        del kept, dropped
        gc.collect()
        assert kept_ref() is not None and dropped_ref() is None
        g.replay()
        assert destroyed == [] and global_ids == []
        g.reset()
        gc.collect()
        assert destroyed == ["cycle 1"] and global_ids == [set()] and kept_ref() is None
        g.reset()  # nothing registered for the new cycle: nothing runs twice
        assert destroyed == ["cycle 1"]

        # The next cycle's callbacks run when the graph is collected.
        with torch.musa.graph(g):
            y = x * 4
        g.register_destroy_callback(lambda: destroyed.append("cycle 2"), synchronize_before_release=True)
        g.replay()
        torch.testing.assert_close(y.cpu(), torch.full((2,), 4.0))
        graph_ref = weakref.ref(g)
        del g
        gc.collect()
        assert graph_ref() is None  # the callbacks do not keep the graph alive
        assert destroyed == ["cycle 1", "cycle 2"]
    finally:
        gh.remove()


def test_split_capture_end(device):
    x = torch.full((3,), 2.0, device=device)
    g = torch.musa.MUSAGraph()
    s = torch.musa.Stream()
    with torch.musa.stream(s):
        g.capture_begin()
        y = x ** 2
        g.capture_end_pre()
    assert not torch.musa.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="instantiate"):
        g.capture_end_post()  # keep_graph=False: instantiate first
    g.instantiate()
    g.capture_end_post()
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((3,), 4.0))
    assert g.pools() == [g.pool()]
    with pytest.raises(RuntimeError, match="capture_end_pre"):
        g.capture_end_post()

    kept = torch.musa.MUSAGraph(keep_graph=True)
    with torch.musa.stream(s):
        kept.capture_begin()
        z = x + 7
        kept.capture_end_pre()
        kept.capture_end_post()  # a kept graph is instantiated on demand
    kept.replay()
    torch.testing.assert_close(z.cpu(), torch.full((3,), 9.0))


def test_hooks_must_be_callable():
    g = torch.musa.MUSAGraph()
    with pytest.raises(TypeError, match="callable"):
        g.register_replay_start_hook(42)
    with pytest.raises(TypeError, match="callable"):
        torch.musa.register_graph_capture_end_hook(None)
