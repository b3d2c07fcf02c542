"""The run-time wrappers' registry (torch_musa/gates/registry.py) against the installed torch, the
README's table, and other devices' calls (each wrapper must hand them to torch's function as given)."""
import importlib
import inspect
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from torch_musa.gates import registry

ENTRIES = registry.entries()
README = Path(__file__).resolve().parents[2] / "README.md"


def _resolve(module_name, attr):
    owner = importlib.import_module(module_name)  # a lazily loaded module: its hook wraps it now
    for part in attr.split("."):
        owner = getattr(owner, part)
    return owner


@pytest.mark.parametrize("g", ENTRIES, ids=lambda g: g.target)
def test_each_gate_wraps_a_function_of_this_torch(g):
    if not g.available():
        pytest.skip(f"{g.target}: this torch lacks it (_version_gate.{g.version_gate})")
    installed = _resolve(g.module, g.attr)
    assert callable(registry.original(g.target))
    assert installed.__torch_musa_wrapped__ is registry.original(g.target)
    for alias_module, alias_name in g.aliases:  # modules that bound torch's function by name
        if alias_module in sys.modules or alias_module == "torch.cuda.comm":
            assert getattr(importlib.import_module(alias_module), alias_name) is installed


def test_registry_refuses_a_second_wrapper_of_one_function():
    g = ENTRIES[0]
    with pytest.raises(ValueError, match="wrapped twice"):
        registry.gate(g.module, g.attr, "again")(lambda torch_fn: torch_fn)
    with pytest.raises(ValueError, match="no predicate"):
        registry.gate("torch", "x", "why", version_gate="no_such_gate")


def _readme_rows():
    text = README.read_text()
    section = text.split("## torch functions wrapped at run time", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| (.+?) \|$", section, flags=re.M)
    assert rows, "README.md has no run-time wrapper table under '## torch functions wrapped at run time'"
    return [(t, f"gates/{f}", why) for t, f, why in rows]


def test_readme_table_lists_exactly_the_registry():
    readme, registered = _readme_rows(), registry.markdown_rows()
    assert len(readme) == len(set(readme)), "README lists a wrapper twice"
    missing, stale = set(registered) - set(readme), set(readme) - set(registered)
    assert not missing and not stale, (
        f"README's wrapper table differs from torch_musa/gates/registry.py: add {sorted(missing)}, "
        f"remove {sorted(stale)} (one row per gate: | `target` | `area.py` | why |)")


def _bf16_compress_hook(state, bucket):  # named as torch's hook is, below
    return bucket


_bf16_compress_hook.__name__ = "bf16_compress_hook"


def _probes():
    """target -> (args, kwargs) of a call that names no musa device: torch's function must get it."""
    from torch._C._profiler import _EventType

    t = torch.ones(2)
    cuda0 = [torch.device("cuda", 0)]
    return {
        "torch.nn.parallel.comm.broadcast": ((t, cuda0), {}),
        "torch.nn.parallel.comm.broadcast_coalesced": (([t], [0]), {}),
        "torch.nn.parallel.comm.reduce_add": (([t, t],), {}),
        "torch.nn.parallel.comm.scatter": ((t, cuda0), {}),
        "torch.nn.parallel.comm.gather": (([t, t],), {}),
        "torch._utils._get_available_device_type": ((), {}),
        "torch.nn.parallel.data_parallel.DataParallel.__init__": ((object(), torch.nn.Linear(2, 2), [0]), {}),
        "torch.nn.parallel.data_parallel.data_parallel": ((torch.nn.Linear(2, 2), t, [0]), {}),
        "torch.nn.attention.flex_attention._validate_device": ((t, t, t), {}),
        "torch._inductor.choices.InductorChoices.get_config_heuristics": ((object(), "cpu"), {}),
        "torch.profiler._utils.BasicEvaluation.compute_queue_depth": (
            (SimpleNamespace(profile=SimpleNamespace(kineto_results=None)),), {}),
        "torch.profiler._pattern_matcher.MatMulDimInFP16Pattern.match": (
            (object(), SimpleNamespace(tag=_EventType.TorchOp, name="aten::mm")), {}),
        "torch.distributed.distributed_c10d.monitored_barrier": ((), {}),
        "torch.cuda.synchronize": ((torch.device("cpu"),), {}),
        "torch.nn.parallel.distributed.DistributedDataParallel._check_comm_hook": (
            (SimpleNamespace(device_type="cpu"), _bf16_compress_hook), {}),
        "torch._inductor.cudagraph_utils.check_lowering_disable_cudagraph": (({cuda0[0]: None},), {}),
        "torch._inductor.cudagraph_trees.cudagraphify_impl": ((lambda xs: xs, [t], ()), {}),
        "torch._inductor.output_code.CompiledFxGraph.post_compile": ((SimpleNamespace(device_types={"cpu"}), 1), {}),
        "torch._dynamo.reset": ((), {}),
        "torch._inductor.graph.GraphLowering.init_wrapper_code": (
            (SimpleNamespace(module=None, device_types={"cpu"}),), {}),
        "torch.Tensor.type": ((t, "torch.DoubleTensor"), {}),
        "torch.set_autocast_enabled": (("cpu", False), {}),
    }


_RETURN_NOTHING = {"torch._dynamo.reset", "torch.set_autocast_enabled"}  # the wrapper adds a step after torch's


def _bound(fn, args, kwargs):
    try:
        b = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):  # a builtin without a signature: the call as made
        return args, kwargs
    b.apply_defaults()
    return tuple(b.arguments.items()), {}


def _same(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a is b or (not isinstance(a, torch.Tensor) and a == b)


def test_every_gate_has_an_other_device_probe():
    assert {g.target for g in ENTRIES} == set(_probes())


@pytest.mark.parametrize("g", ENTRIES, ids=lambda g: g.target)
def test_each_gate_hands_other_devices_to_torch_unchanged(g):
    if not g.available():
        pytest.skip(f"{g.target}: this torch lacks it (_version_gate.{g.version_gate})")
    args, kwargs = _probes()[g.target]
    torch_fn = registry.original(g.target) if g.target in registry._originals else _resolve(g.module, g.attr)
    calls, result = [], object()

    def recorder(*a, **k):
        calls.append((a, k))
        return result

    returned = g.make(recorder)(*args, **kwargs)
    assert len(calls) == 1, f"{g.target}: torch's function ran {len(calls)} times for a non-musa call"
    assert _same(_bound(torch_fn, *calls[0]), _bound(torch_fn, args, kwargs)), \
        f"{g.target}: the non-musa call reached torch changed: {calls[0]} for {(args, kwargs)}"
    assert returned is (None if g.target in _RETURN_NOTHING else result)
