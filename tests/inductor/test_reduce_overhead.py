"""torch.compile(mode="reduce-overhead") on musa: torch's graph trees replaying MUSA Graphs.

Replays are counted on torch.musa.MUSAGraph itself; results are compared with eager ones.
The models are tiny: compiles are slow on CI's two cores.
"""
import copy
import gc

import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters

from torch_musa._inductor import graph_trees


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()  # musa's graph trees too
    counters.clear()
    # A cached graph keeps the graphing decision it was compiled with: compile afresh.
    with torch._inductor.config.patch(fx_graph_cache=False):
        yield
    torch._dynamo.reset()


@pytest.fixture
def graph_calls(monkeypatch):
    """Counts MUSAGraph captures (with their pools) and replays. The trees' manager captures
    one empty graph first, to make the pool every graph of the trees then shares."""
    calls = {"replay": 0, "pools": []}
    replay, capture_begin = torch.musa.MUSAGraph.replay, torch.musa.MUSAGraph.capture_begin

    def counted_replay(self):
        calls["replay"] += 1
        return replay(self)

    def counted_capture_begin(self, pool=None, capture_error_mode="global"):
        calls["pools"].append(tuple(pool) if pool is not None else None)
        return capture_begin(self, pool=pool, capture_error_mode=capture_error_mode)

    monkeypatch.setattr(torch.musa.MUSAGraph, "replay", counted_replay)
    monkeypatch.setattr(torch.musa.MUSAGraph, "capture_begin", counted_capture_begin)
    return calls


def _f(a):
    return (a.tanh() * 3 + 1).sum(1)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_calls_replay_a_graph_with_eager_results(device, graph_calls, mode):
    f = torch.compile(_f, mode=mode)
    for _ in range(5):
        x = torch.randn(4, 8, device=device)
        torch.testing.assert_close(f(x), _f(x))
    # call 1 warms up, call 2 records (and replays once), calls 3-5 replay
    assert len(graph_calls["pools"]) == 2
    assert graph_calls["replay"] == 4
    assert counters["inductor"]["cudagraph_skips"] == 0


def test_profiler_sees_one_graph_replay_per_call(device):
    from torch.profiler import ProfilerActivity, profile

    f = torch.compile(_f, mode="reduce-overhead")
    x = torch.randn(4, 8, device=device)
    for _ in range(3):  # warm-up, recording, a replay
        f(x)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for i in range(5):
            torch.testing.assert_close(f(x + i), _f(x + i))
    assert sum(e.name == "MUSAGraph replay" for e in prof.events()) == 5


def test_new_shape_records_a_new_graph_in_the_same_pool(device, graph_calls):
    f = torch.compile(_f, mode="reduce-overhead", dynamic=False)
    reserved = []
    for n in (4, 4, 4, 6, 6, 6, 4):
        x = torch.randn(n, 8, device=device)
        torch.testing.assert_close(f(x), _f(x))
        reserved.append(torch.musa.memory_reserved(device))
    assert reserved[-1] == reserved[2]  # the second graph lives in the first one's pool memory
    pools = graph_calls["pools"]
    assert len(pools) == 3  # one graph per shape; the last call replays the first
    assert pools[0] is not None and len(set(pools)) == 1  # the trees' one pool


def test_overwritten_output_raises_and_steps_replay(device, graph_calls):
    f = torch.compile(_f, mode="reduce-overhead")
    x = torch.randn(4, 8, device=device)
    torch.compiler.cudagraph_mark_step_begin()
    first = f(x)  # the warm-up run's output: the next step's recording writes over it
    torch.compiler.cudagraph_mark_step_begin()
    torch.testing.assert_close(f(x), _f(x))
    with pytest.raises(RuntimeError, match="overwritten by a subsequent run"):
        first + 1
    for i in range(3):
        torch.compiler.cudagraph_mark_step_begin()
        torch.testing.assert_close(f(x + i), _f(x + i))
    assert graph_calls["replay"] == 4  # one at recording, one per step after it


def test_a_new_graph_keeps_off_live_outputs_of_replayed_ones(device, graph_calls, monkeypatch):
    import torch_musa

    claimed = []
    claim = torch_musa._C._graph_tree_claim_storages
    monkeypatch.setattr(torch_musa._C, "_graph_tree_claim_storages",
                        lambda d, pool, storages: (claimed.append(len(storages)), claim(d, pool, storages)))
    f = torch.compile(_f, mode="reduce-overhead")
    g = torch.compile(lambda a: a * 2 + 1, mode="reduce-overhead")
    x = torch.randn(4, 8, device=device)
    for i in range(6):
        torch.compiler.cudagraph_mark_step_begin()
        a = f(x + i)
        if i >= 2:  # f replays; then g warms up, records, replays after it in the same step
            b = g(a)
            torch.testing.assert_close(a, _f(x + i))  # g's memory is not a's
            torch.testing.assert_close(b, _f(x + i) * 2 + 1)
    assert claimed and max(claimed) >= 1  # a, alive, was made an allocation of the pool again
    assert graph_calls["replay"] >= 5


def test_training_step_replays_forward_and_backward(device, graph_calls):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
    ref = copy.deepcopy(model)
    cmodel = torch.compile(model, mode="reduce-overhead")
    for _ in range(4):
        x = torch.randn(4, 8, device=device)
        # .grad as torch.cuda's graph trees need it: set to None, not accumulated into graph memory
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        cmodel(x).sum().backward()
        ref(x).sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
    assert len(graph_calls["pools"]) == 3  # the forward's graph and the backward's
    assert len(set(graph_calls["pools"])) == 1
    assert graph_calls["replay"] >= 6  # 2 at recording, then 2 per step


def test_forwards_pending_backward_warn(device):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)).to(device)
    cmodel = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(4, 8, device=device)
    # (torch's message: "outputs from a previous step still require backward" from 2.12, "pending,
    # uninvoked backwards" before)
    with pytest.warns(UserWarning, match="still require backward|pending, uninvoked backwards") as caught:
        outs = [cmodel(x) for _ in range(5)]
    torch.testing.assert_close(outs[-1], model(x))
    # the trees' empty pool-making capture warns nothing (torch.cuda's trees catch that warning; only
    # the cuda driver's capture emits it, so this checks something there)
    assert not [w for w in caught if "Graph is empty" in str(w.message)]


def test_musa_trees_keep_their_own_thread_local_slots(device):
    """torch's tree module, run again for musa, stashes its slots (which autograd's threads inherit)
    under musa's keys: torch.cuda's stay its own objects, and a thread sees the musa trees' ones."""
    import threading

    from torch._inductor import cudagraph_trees

    trees = graph_trees.tree_module()
    for key in ("tree_manager_containers", "tree_manager_locks"):
        assert torch._C._get_obj_in_tls(key) is getattr(cudagraph_trees.local, key)
        assert torch._C._get_obj_in_tls("musa_" + key) is getattr(trees.local, key)

    def seen_by_a_thread(module):
        seen = []

        def look():
            try:
                seen.append(module.get_obj(module.local, "tree_manager_containers"))
            except AssertionError:  # torch's own check: the slot is not in this thread's TLS
                seen.append(None)

        worker = threading.Thread(target=look)
        worker.start()
        worker.join()
        return seen[0]

    # A new thread sees the musa trees' slot exactly where it sees torch.cuda's (torch 2.11's new
    # threads inherit neither; later torch's inherit both).
    if seen_by_a_thread(cudagraph_trees) is None:
        assert seen_by_a_thread(trees) is None
    else:
        assert seen_by_a_thread(trees) == trees.local.tree_manager_containers


def test_dynamo_reset_frees_the_musa_trees(device):
    f = torch.compile(_f, mode="reduce-overhead")
    x = torch.randn(4, 8, device=device)
    for _ in range(3):
        f(x)
    trees = graph_trees.tree_module()
    manager = trees.get_manager(0, create_if_none_exists=False)
    assert manager is not None
    pool = manager.cuda_graphs_thread_pool
    del manager, f
    torch._dynamo.reset()
    assert trees.get_manager(0, create_if_none_exists=False) is None
    gc.collect()
    assert torch.musa._C._mempool_use_count(0, pool) == 0  # the pool's graphs are gone, and it with them


def test_cpu_compiled_function_is_torchs(graph_calls):
    f = torch.compile(_f, mode="reduce-overhead")
    x = torch.randn(4, 8)
    torch.testing.assert_close(f(x), _f(x))
    torch.testing.assert_close(f(x), _f(x))
    assert graph_calls["pools"] == [] and graph_calls["replay"] == 0
    assert counters["inductor"]["cudagraph_skips"] == 1  # torch's "skipping cudagraphs due to cpu device"


def test_wrappers_leave_other_devices_to_torch():
    from torch._inductor import cudagraph_trees, cudagraph_utils
    from torch_musa.gates import graph_trees as graph_tree_gates, registry

    original = registry.original("torch._inductor.cudagraph_utils.check_lowering_disable_cudagraph")
    cpu = {torch.device("cpu"): None}
    assert cudagraph_utils.check_lowering_disable_cudagraph(dict(cpu)) == original(dict(cpu))
    seen = []
    wrapped = graph_tree_gates._wrap_cudagraphify_impl(lambda *a, **k: seen.append("torch"))
    wrapped(lambda i: i, [torch.randn(2)], ())
    assert seen == ["torch"]
    assert cudagraph_trees.cudagraphify_impl.__wrapped__ is not None
