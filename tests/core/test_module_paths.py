"""torch_musa's module paths (torch_musa.core.*, musa_graph, multi_tensor_apply, profiler,
torch.version.musa) lead to this package's own objects: the same modules and functions, no copies."""
import importlib

import pytest
import torch

import torch_musa


@pytest.mark.parametrize("path, same_as", [
    ("torch_musa.core.memory", "torch_musa.memory"),
    ("torch_musa.core.random", "torch_musa.random"),
    ("torch_musa.core.stream", "torch_musa.streams"),
    ("torch_musa.core.mudnn", "torch_musa.backends.mudnn"),
    ("torch_musa.musa_graph", "torch_musa.graphs"),
    ("torch_musa.musa_graph.graphs", "torch_musa.graphs"),
    ("torch_musa._graph_lifecycle", "torch_musa.graphs.lifecycle"),
    ("torch_musa._dynamo_musagraphs", "torch_musa.graphs.dynamo_backend"),
])
def test_module_paths_are_the_same_modules(path, same_as):
    assert importlib.import_module(path) is importlib.import_module(same_as)


def test_core_names_are_torch_musas_own_objects():
    from torch_musa.core import _lazy_init, _utils, amp, device, reductions, serialization  # noqa: F401
    from torch_musa.core.amp.autocast_mode import autocast, custom_bwd, custom_fwd
    from torch_musa.core.amp.grad_scaler import GradScaler, OptState
    from torch_musa.core.memory import memory_allocated
    from torch_musa.core.stream import Event, Stream

    assert autocast is torch.musa.amp.autocast and custom_fwd is torch.musa.amp.custom_fwd
    assert custom_bwd is torch.musa.amp.custom_bwd and GradScaler is torch.musa.amp.GradScaler
    assert OptState is torch.amp.grad_scaler.OptState and amp.GradScaler is GradScaler
    assert memory_allocated is torch.musa.memory_allocated
    assert Stream is torch.musa.Stream and Event is torch.musa.Event
    assert device.Device is torch.musa.device and device.DeviceOf is torch.musa.device_of
    assert device.set_device is torch.musa.set_device and device.is_bf16_supported is torch.musa.is_bf16_supported
    assert _lazy_init._lazy_init is torch.musa._lazy_init and torch_musa.core._lazy_init_musa is torch.musa._lazy_init
    assert torch_musa.fork_rng is torch_musa.core.random.fork_rng
    assert torch_musa.musa_graph.MUSAGraph is torch.musa.MUSAGraph
    assert torch_musa.musa_graph.make_graphed_callables is torch.musa.make_graphed_callables


def test_grad_scaler_from_the_core_path_scales_on_musa(device):
    from torch_musa.core.amp import GradScaler

    scaler = GradScaler(init_scale=4.0)
    w = torch.nn.Parameter(torch.ones(3, device=device))
    opt = torch.optim.SGD([w], lr=0.5)
    scaler.scale((w * 2).sum()).backward()
    assert torch.equal(w.grad.cpu(), torch.full((3,), 8.0))  # scaled by 4
    scaler.step(opt)  # unscaled before the step: 1 - 0.5 * 2
    scaler.update()
    assert torch.equal(w.detach().cpu(), torch.zeros(3))


def test_get_musa_device_index_as_torch_cudas_get_device_index():
    from torch_musa.core._utils import _get_musa_device_index as idx

    torch.musa.set_device(0)
    assert idx(None) == 0 and idx(0) == 0 and idx(1) == 1
    assert idx("musa") == 0 and idx("musa:1") == 1 and idx(torch.device("musa", 1)) == 1
    assert idx(torch.musa.device(1)) == 1
    assert idx("cpu", allow_cpu=True) == -1  # torch._utils._get_device_index's answer for cpu
    with pytest.raises(ValueError, match="Expected a musa device, but got: cpu"):
        idx("cpu")
    with pytest.raises(ValueError, match="Expected a musa or cpu device, but got: meta"):
        idx(torch.device("meta"), allow_cpu=True)
    if torch.musa.device_count() > 1:
        with torch.musa.device(1):
            assert idx(None) == 1 and idx("musa") == 1


def test_torch_version_musa_is_the_runtime_api_level():
    assert torch.version.musa == str(torch.musa._C._runtime_version())
    assert torch.version.musa.isdigit()


def test_event_reductions_register_with_forking_pickler():
    from multiprocessing.reduction import ForkingPickler

    from torch_musa.core import reductions

    reductions.init_reductions()
    assert ForkingPickler._extra_reducers[torch.musa.Event] is reductions.reduce_event


# --- the module surface Moore Threads' torch_musa programs use (scripts/check_module_surface.py) ---
import os  # noqa: E402
import sys  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(_REPO, "scripts"))
import check_module_surface as surface  # noqa: E402

with open(os.path.join(os.path.dirname(__file__), "module_surface.txt")) as _fh:
    _REFERENCES = [line.strip() for line in _fh if line.strip() and not line.startswith("#")]


def test_every_referenced_module_path_and_name_resolves():
    missing = {}
    for ref in _REFERENCES:
        try:
            surface.resolve(ref)
        except Exception as e:  # noqa: BLE001
            missing[ref] = f"{type(e).__name__}: {e}"
    assert set(missing) == set(surface.KNOWN_MISSING), missing


def test_resolve_names_what_is_missing():
    assert surface.resolve("torch_musa.testing.OpTest") is torch.musa.testing.OpTest
    with pytest.raises(AttributeError, match="torch_musa.core.no_such_name: no such attribute or module"):
        surface.resolve("torch_musa.core.no_such_name")


def test_get_musa_arch_is_device_0s_capability(monkeypatch):
    from torch_musa.core._utils import _get_musa_arch

    monkeypatch.delenv("TORCH_MUSA_ARCH", raising=False)
    major, minor = torch.musa.get_device_capability(0)
    assert _get_musa_arch() == major * 10 + minor
    monkeypatch.setenv("TORCH_MUSA_ARCH", "31")
    assert _get_musa_arch() == 31 and torch.musa.testing.get_musa_arch() == 31
    monkeypatch.setenv("TORCH_MUSA_ARCH", "abc")
    with pytest.raises(ValueError, match="TORCH_MUSA_ARCH='abc' is not a musa architecture; set one of 21, 22, 31"):
        _get_musa_arch()


def test_op_test_compares_musa_with_cpu(device):
    from torch_musa import testing

    x, y = torch.randn(4, 5, requires_grad=True), torch.randn(4, 5)
    test = testing.OpTest(func=torch.add, input_args={"input": x, "other": y})
    test.check_result()
    test.check_out_ops()
    test.check_grad_fn()
    test.check_result(train=True)
    # A musa result that differs from the reference fails, naming the error.
    wrong = testing.OpTest(func=torch.add, refer_func=torch.sub, input_args={"input": x, "other": y})
    with pytest.raises(AssertionError, match="elements differ; max abs error"):
        wrong.check_result()
    # A module class is built with the same seed on each device; gradients of weights compared.
    layer = testing.OpTest(func=torch.nn.Linear, input_args={"in_features": 5, "out_features": 3},
                           test_dtype=torch.float32, comparators=testing.DefaultComparator(abs_diff=1e-5))
    layer.check_result({"input": torch.randn(2, 5, requires_grad=True)}, train=True)


def test_inplace_check_and_comparators(device):
    from torch_musa import testing

    check = testing.InplaceOpChek("mul_", torch.randn(3, 4), {"other": torch.randn(3, 4)})
    check.check_address()
    check.check_res()
    a = torch.tensor([1.0, 2.0, float("nan")])
    assert testing.DefaultComparator(equal_nan=True)(a.to(device), a)
    assert not testing.DefaultComparator()(a.to(device), a)  # NaN != NaN unless asked
    assert testing.AbsDiffComparator(1e-3)(a[:2] + 1e-4, a[:2]) and not testing.AbsDiffComparator(1e-5)(a[:2] + 1e-4, a[:2])
    assert testing.RelDiffComparator(1e-2)(a[:2] * 1.001, a[:2]) and not testing.RelDiffComparator(1e-4)(a[:2] * 1.001, a[:2])
    assert testing.BooleanComparator()(torch.tensor([True, False]), torch.tensor([True, False]))
    assert not testing.DefaultComparator()(torch.ones(2), torch.ones(3))  # shapes differ


def test_testing_helpers(device):
    from torch_musa import testing

    ip, port = testing.gen_ip_port()
    assert ip.startswith("127.") and len(ip.split(".")) == 4 and 10000 <= int(port) < 32768
    assert testing.gen_ip_port() == (ip, port)  # spawned ranks each call it: they must agree
    assert testing.MULTIGPU_AVAILABLE == (torch.musa.device_count() >= 2)
    assert torch.bfloat16 in testing.get_float_types() or testing.get_musa_arch() < 22
    with testing.freeze_rng_state():
        first = torch.rand(3, device=device)
    assert torch.equal(torch.rand(3, device=device), first)  # the state was restored
    calls = []
    testing.test_on_nonzero_card_if_multiple_musa_device(1)(lambda: calls.append(torch.musa.current_device()))()
    assert calls == ([1, 0] if testing.MULTIGPU_AVAILABLE else [0])


def test_mudnn_version_is_the_feature_level_of_mla_rope():
    assert torch.backends.mudnn.version() == torch.backends.mudnn._FEATURE_LEVEL >= 3000


def test_tensor_type_accepts_torch_musa_names(device):
    for name, dtype in (("ByteTensor", torch.uint8), ("FloatTensor", torch.float32), ("BoolTensor", torch.bool)):
        t = torch.arange(6).type(f"torch_musa.{name}")
        assert t.device.type == "musa" and t.dtype == dtype
        assert torch.equal(t.cpu(), torch.arange(6).type(f"torch.{name}"))
        assert t.type() == f"torch.musa.{name}"
    with pytest.raises(ValueError, match="invalid type"):
        torch.arange(3).type("torch_musa.NoSuchTensor")


def test_set_autocast_enabled_without_device_sets_musa():
    from torch_musa.gates import registry

    devices = ("cpu", "cuda", "musa")

    def enabled():
        return {d for d in devices if torch.is_autocast_enabled(d)}

    def clear():
        for d in devices:
            torch.set_autocast_enabled(d, False)

    legacy = registry.original("torch.set_autocast_enabled")
    try:
        legacy(True)  # torch's own legacy form: CUDA's switch on torch <= 2.14, the accelerator's after
        torch_sets = enabled()
        clear()
        torch.set_autocast_enabled(True)
        assert enabled() == torch_sets | {"musa"}
        torch.set_autocast_enabled("musa", False)  # the device form is torch's, unchanged
        assert enabled() == torch_sets - {"musa"}
    finally:
        clear()
    assert not enabled()


def test_ext_loader_loads_the_multi_tensor_kernels(device):
    from torch_musa.utils import ext_loader

    ext = ext_loader.load_ext("_ext", ["multi_tensor_l2norm", "multi_tensor_lamb"])
    with pytest.raises(AttributeError, match="torch_musa._ext lacks no_such_kernel"):
        ext_loader.load_ext("_ext", "no_such_kernel")
    with pytest.raises(ImportError, match="torch_musa has no extension module '_nope'"):
        ext_loader.load_ext("_nope")
    # One LAMB step (decoupled decay, clipping at norm 1) against the per-tensor formula on CPU.
    torch.manual_seed(0)
    ps, gs = [torch.randn(4, 3), torch.randn(5)], [torch.randn(4, 3), torch.randn(5)]
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.99, 1e-6, 0.01
    gnorm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in gs]))
    expected = []
    for p, g in zip(ps, gs):
        g = g / gnorm  # clipped to norm 1
        m, v = (1 - b1) * g, (1 - b2) * g * g
        u = (m / (1 - b1)) / ((v / (1 - b2)).sqrt() + eps) + wd * p
        expected.append(p - lr * (p.norm() / u.norm()) * u)
    mp, mg = [p.to(device) for p in ps], [g.to(device) for g in gs]
    mm, mv = [torch.zeros_like(p) for p in mp], [torch.zeros_like(p) for p in mp]
    flag = torch.zeros(1, dtype=torch.int, device=device)
    ext.multi_tensor_lamb(2048, flag, [mg, mp, mm, mv], lr, b1, b2, eps, 1, True, wd, True, 1, gnorm.item(), 1.0)
    for got, want in zip(mp, expected):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_get_device_properties_private_name_is_the_public_function():
    # torch.cuda._get_device_properties(i) is what torch.cuda.get_device_properties(i) returns
    assert torch_musa._get_device_properties is torch.musa.get_device_properties
    for i in range(torch.musa.device_count()):
        assert torch_musa._get_device_properties(i) == torch.musa.get_device_properties(torch.device("musa", i))
    with pytest.raises(RuntimeError, match="invalid musa device index"):
        torch_musa._get_device_properties(torch.musa.device_count())


def test_find_musa_home_is_a_root_with_musas_headers_and_runtime(monkeypatch, tmp_path):
    from torch_musa.utils import musa_extension

    monkeypatch.delenv("MUSA_HOME", raising=False)
    monkeypatch.delenv("MUSA_PATH", raising=False)
    home = musa_extension._find_musa_home()
    assert os.path.isfile(os.path.join(home, "include", "musa_runtime.h"))
    assert os.path.isfile(os.path.join(home, "lib", "libmusart.so"))
    assert home in [os.path.dirname(p) for p in musa_extension.include_paths()]  # where builds look
    monkeypatch.setenv("MUSA_PATH", str(tmp_path / "path"))
    assert musa_extension._find_musa_home() == str(tmp_path / "path")
    monkeypatch.setenv("MUSA_HOME", str(tmp_path / "home"))  # MUSA_HOME first, as theirs and torch's CUDA_HOME
    assert musa_extension._find_musa_home() == str(tmp_path / "home")


def test_apply_distributed_patch_ensures_mccl_serves_musa(monkeypatch):
    import torch.distributed as dist

    from torch_musa.distributed import _apply_distributed_patch

    # A torch that lost the registration (as a fresh torch.distributed has none) gets it back.
    monkeypatch.delitem(dist.Backend._plugins, "MCCL")
    monkeypatch.delitem(dist.Backend.default_device_backend_map, "musa")
    assert not dist.is_mccl_available()
    _apply_distributed_patch()
    assert dist.Backend.default_device_backend_map["musa"] == "mccl" and dist.is_mccl_available()
    monkeypatch.setitem(dist.Backend.default_device_backend_map, "musa", "gloo")
    with pytest.raises(RuntimeError, match="runs musa tensors with 'gloo', not torch_musa's 'mccl'.*backend='mccl'"):
        _apply_distributed_patch()
