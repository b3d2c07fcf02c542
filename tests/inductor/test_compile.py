"""torch.compile with Inductor on musa tensors: compiled results equal eager ones.

Host driver: Inductor's C++ kernels over musa memory. cuda driver: Triton kernels on the
current musa stream. Compiles are slow on CI's two cores, so the models are tiny.
"""
import copy
import operator
import os

import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounterWithBackend
from torch._inductor.utils import run_and_get_code

from tests.conftest import flash_attention_only

ON_GPU = torch.musa.get_driver_name() == "cuda" if torch.musa.is_available() else False


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _kernel_kind(code: str) -> str:
    if "@triton.jit" in code:
        return "triton"
    if "cpp_fused" in code and 'extern "C"' in code:
        return "cpp"
    return "none"


def test_fused_kernel_runs_on_musa_memory(device):
    def f(x, y):
        return (x.sin() + y).relu().sum(1) * 2

    x, y = torch.randn(64, 64, device=device), torch.randn(64, 64, device=device)
    out, (code, *_) = run_and_get_code(torch.compile(f), x, y)
    assert out.device == device
    torch.testing.assert_close(out, f(x, y), rtol=1e-5, atol=1e-5)
    assert _kernel_kind(code) == ("triton" if ON_GPU else "cpp")
    call_body = code.split("def call")[-1]
    assert "aten.sin.default(" not in call_body and "extern_kernels" not in call_body  # fused, no aten calls
    # The kernel-device boundary's results carry no size asserts (their layout is their
    # argument's), and musa devices are prebuilt objects, not built per call.
    asserts = [line for line in call_body.splitlines() if "assert_size_stride(" in line]
    assert asserts and not any("torch_musa" in line for line in asserts)
    assert "device(type='musa'" not in call_body and "torch.musa._inductor.DEVICES[" in call_body


def test_results_are_computed_once_as_on_the_kernel_device(device):
    # A result that other nodes read too is stored once, where they load it, as in the kernel
    # device's own graph: the wrapper's return hands it over (an op in the graph would leave it
    # inlined into the layer norm's loops and computed there again).
    def f(x, b):
        y = (x * 2 + b).sin()
        return y, nn.functional.layer_norm(y, (64,)) * 3

    x, b = torch.randn(32, 64, device=device), torch.randn(64, device=device)
    out, (code, *_) = run_and_get_code(torch.compile(f), x, b)
    torch._dynamo.reset()
    native = "cuda" if ON_GPU else "cpu"
    _, (native_code, *_) = run_and_get_code(torch.compile(f), x.cpu().to(native), b.cpu().to(native))
    assert code.count("sin(") == native_code.count("sin(") > 0
    assert "_from_kernel_device(" in code.split("return (")[-1]
    for got, want in zip(out, f(x, b)):
        assert got.device == device
        torch.testing.assert_close(got, want)


def test_graph_runs_as_kernel_device_code_on_the_current_musa_stream(device):
    # The kernel-device pass: Inductor's code for the kernel device (C++ on the host driver; on
    # the cuda driver CUDA code inside kernel regions, with buffers from musa memory), ordered
    # after the eager work queued before it on a user musa stream.
    def f(x, w):
        return torch.relu(x @ w).sum(0) + 1

    big = torch.randn(2048, 2048, device=device)
    w = torch.randn(2048, 64, device=device)
    compiled = torch.compile(f)
    _, (code, *_) = run_and_get_code(compiled, big, w)  # compiles (and autotunes) here
    s = torch.musa.Stream()
    s.wait_stream(torch.musa.current_stream())
    native_before = torch.cuda.memory_allocated() if ON_GPU else 0
    with torch.musa.stream(s):
        x = (big @ big) / 2048  # queued first on s: the compiled graph must wait for it
        out = compiled(x, w)
        ref = f(x, w)
    s.synchronize()
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)
    assert out.device == device
    if ON_GPU:
        assert "_KernelRegion" in code and "empty_strided_cuda" in code
        assert code.count("with torch.musa._C._KernelRegion") == 1  # one region, as CUDA's one device guard
        assert torch.cuda.memory_allocated() == native_before  # no buffer from torch.cuda's allocator
    else:
        assert _kernel_kind(code) == "cpp"


def test_wrapper_device_choice_changes_for_marked_musa_graphs_only():
    # torch's GraphLowering.init_wrapper_code refuses cuda+musa and picks the wrapper by device
    # type; the run-time wrapper lets a graph the kernel-device pass marked through as musa's (a
    # CUDA graph, or one whose results musa's wrapper hands over), and leaves every other graph as is.
    from torch_musa.gates import inductor_graph
    from torch_musa._inductor.kernel_device_pass import KERNEL_REGION_KEY, MUSA_RESULTS_KEY

    seen = []
    init = inductor_graph._wrap_init_wrapper_code(lambda self: seen.append(set(self.device_types)))

    class Lowering:
        def __init__(self, types, **meta):
            self.device_types = set(types)
            self.module = torch.fx.GraphModule(nn.Module(), torch.fx.Graph())
            self.module.meta.update(meta)

    graphs = [Lowering({"cuda", "musa"}), Lowering({"cuda", "musa"}, **{KERNEL_REGION_KEY: "cuda"}),
              Lowering({"cpu"}), Lowering({"cpu"}, **{MUSA_RESULTS_KEY: ((0, 0),)})]
    for g in graphs:
        init(g)
    assert seen == [{"cuda", "musa"}, {"musa"}, {"cpu"}, {"cpu", "musa"}]
    assert [g.device_types for g in graphs] == [{"cuda", "musa"}, {"cuda", "musa"}, {"cpu"}, {"cpu"}]  # restored


def test_kernel_region_stays_open_across_musa_and_cuda_nodes():
    # In a graph made a CUDA graph, each boundary op is a musa node with a CUDA result: the
    # guard Inductor closes at such a switch and reopens for the same index stays one region.
    # Other graphs, and another index, keep Inductor's guards.
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch_musa._inductor.kernel_device_pass import KERNEL_REGION_KEY
    from torch_musa._inductor.wrapper import MusaPythonWrapperCodegen

    def guard_lines(marked):
        graph = torch.fx.Graph()
        graph.output(())
        gm = torch.fx.GraphModule(nn.Module(), graph)
        if marked:
            gm.meta[KERNEL_REGION_KEY] = "cuda"
        with V.set_graph_handler(GraphLowering(gm)):
            wrapper = MusaPythonWrapperCodegen()
            for index in (0, 0, 1):
                wrapper.codegen_device_guard_enter(index)
                wrapper.writeline(f"work on {index}")
                wrapper.codegen_device_guard_exit()
        return [line if isinstance(line, str) else type(line).__name__[:5] for line in wrapper.lines]

    assert guard_lines(True) == ["Enter", "work on 0", "work on 0", "ExitD", "Enter", "work on 1", "ExitD"]
    assert guard_lines(False) == ["Enter", "work on 0", "ExitD"] * 2 + ["Enter", "work on 1", "ExitD"]


def test_result_lands_on_the_input_device(two_devices):
    _, d1 = two_devices
    x = torch.randn(16, 16, device=d1)
    out = torch.compile(lambda a: (a.cos() * 3).sum(0))(x)
    assert out.device == d1
    torch.testing.assert_close(out, (x.cos() * 3).sum(0))


def test_inputs_mutated_in_place_and_views_of_inputs(device):
    def f(x, buf):
        buf.mul_(0.5).add_(x)  # mutation of a graph input
        return x.t(), buf.sum()  # a view of an input, and a reduction

    x = torch.randn(8, 4, device=device)
    buf = torch.ones(8, 4, device=device)
    ref_buf = buf.clone()
    view, total = torch.compile(f)(x, buf)
    ref_buf.mul_(0.5).add_(x)
    torch.testing.assert_close(buf, ref_buf)
    assert view.data_ptr() == x.data_ptr() and view.device == device
    torch.testing.assert_close(total, ref_buf.sum())
    x.zero_()
    assert view.abs().sum().item() == 0  # still the input's memory


def test_compiled_results_behave_like_any_musa_tensor(device):
    out = torch.compile(lambda a: a.sin() * 2)(torch.randn(16, device=device))
    out.record_stream(torch.musa.Stream())
    with pytest.warns(UserWarning, match="resized"):
        torch.add(torch.ones(64, device=device), 1, out=out)  # grows the compiled result's storage
    assert out.shape == (64,) and out.device == device
    torch.testing.assert_close(out, torch.full((64,), 2.0, device=device))


def _train(model, steps, make_batch, loss_fn, compile_model):
    torch.manual_seed(0)
    run = torch.compile(model, fullgraph=True) if compile_model else model  # standard models: no graph breaks
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        x, y = make_batch(step)
        loss = loss_fn(run(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def _check_training(model, make_batch, loss_fn, rtol=1e-4, atol=1e-4):
    compiled_model = copy.deepcopy(model)
    eager = _train(model, 5, make_batch, loss_fn, compile_model=False)
    compiled = _train(compiled_model, 5, make_batch, loss_fn, compile_model=True)
    torch.testing.assert_close(compiled, eager, rtol=rtol, atol=atol)
    assert eager[-1] < eager[0]  # it trained
    # (Parameters are not compared: Adam turns rounding noise in a zero gradient, such as a
    # bias before batch norm, into a full step either way.)


def test_mlp_training_matches_eager(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(device)
    data = [(torch.randn(8, 16, device=device), torch.randn(8, 4, device=device)) for _ in range(1)]
    _check_training(model, lambda i: data[0], nn.functional.mse_loss)


def test_cnn_training_matches_eager(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 10)).to(device)
    data = [(torch.randn(4, 3, 8, 8, device=device), torch.randint(0, 10, (4,), device=device)) for _ in range(1)]
    _check_training(model, lambda i: data[0], nn.functional.cross_entropy)
    assert model[1].num_batches_tracked.item() == 5  # running stats were written back


class TinyLM(nn.Module):
    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.block = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        mask = nn.Transformer.generate_square_subsequent_mask(idx.shape[1], device=idx.device)
        return self.head(self.block(self.emb(idx), src_mask=mask, is_causal=True))


def test_transformer_lm_training_matches_eager(device):
    torch.manual_seed(0)
    model = TinyLM().to(device)
    data = [torch.randint(0, 64, (4, 16), device=device) for _ in range(1)]
    _check_training(model, lambda i: (data[0], data[0]),
                    lambda logits, y: nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()))


def test_dynamic_shapes_bounded_recompiles(device):
    cnt = CompileCounterWithBackend("inductor")
    f = torch.compile(lambda a: nn.functional.gelu(a) @ a.t(), backend=cnt)
    for n in (3, 5, 9):  # the second length marks the dimension dynamic; the third reuses it
        a = torch.randn(n, 4, device=device)
        torch.testing.assert_close(f(a), nn.functional.gelu(a) @ a.t(), rtol=1e-5, atol=1e-5)
    assert cnt.frame_count == 2


def test_dynamic_true_compiles_once_for_all_lengths(device):
    cnt = CompileCounterWithBackend("inductor")
    f = torch.compile(lambda a: torch.softmax(a * 2, dim=-1).sum(0), backend=cnt, dynamic=True)
    for n in (4, 7, 13):
        a = torch.randn(n, 6, device=device)
        torch.testing.assert_close(f(a), torch.softmax(a * 2, dim=-1).sum(0))
    assert cnt.frame_count == 1


def test_op_without_lowering_falls_back_to_the_op_layer(device):
    @torch.library.custom_op("musa_test::scaled_cumprod", mutates_args=())
    def scaled_cumprod(x: torch.Tensor, s: float) -> torch.Tensor:
        return torch.cumprod(x, 0) * s

    @scaled_cumprod.register_fake
    def _(x, s):
        return torch.empty_like(x)

    def f(x):
        return scaled_cumprod(x.exp(), 2.0) + torch.linalg.slogdet(x @ x.t() + 4 * torch.eye(4, device=x.device))[1]

    x = torch.randn(4, 4, device=device)
    out, (code, *_) = run_and_get_code(torch.compile(f), x)
    torch.testing.assert_close(out, f(x), rtol=1e-4, atol=1e-4)
    assert "musa_test.scaled_cumprod" in code


def test_complex_results_of_ops_whose_layout_depends_on_the_device(device):
    # cuFFT's and the CUDA eig's result strides differ from the CPU's, which musa's trace
    # assumes; on the cuda driver a compiled result must not need a complex copy kernel.
    x = torch.randn(5, 6, 7, device=device)
    m = torch.randn(5, 5, device=device)
    fns = [lambda t: torch.fft.fft(t, n=10, dim=1, norm="ortho"), lambda t: torch.fft.rfft(t, dim=1),
           lambda t: torch.fft.ifft(t, dim=0), lambda t: torch.linalg.eig(t)]
    for f, arg in zip(fns, (x, x, x, m)):
        torch._dynamo.reset()
        want, got = f(arg), torch.compile(f)(arg)
        torch.testing.assert_close(got, want)
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
            assert g.device == w.device and g.stride() == w.stride()


def test_random_ops_draw_from_the_musa_generator(device):
    # Seeded ops Inductor keeps as calls (multinomial, randperm; attention with dropout on GPUs)
    # run on musa, as eager: compiled draws equal eager's (torch.cuda's compiled fallbacks equal
    # its eager ones), whatever the CPU's seed. Inductor's own dropout takes its seeds from musa's
    # generator. None of them keeps the graph from running as kernel-device code.
    def calls(x):
        return torch.multinomial(x.softmax(-1), 3, replacement=True) + 1, torch.randperm(6, device=x.device)

    def dropout(x):
        return nn.functional.dropout(x * 2, 0.5)

    x = torch.randn(4, 16, device=device)
    torch.musa.manual_seed(5)
    eager = calls(x)
    compiled_calls, compiled_dropout = torch.compile(calls), torch.compile(dropout)
    _, (code, *_) = run_and_get_code(compiled_calls, x)
    compiled_dropout(x)
    runs = []
    for musa_seed, cpu_seed in ((5, 11), (5, 22), (6, 11)):
        torch.musa.manual_seed(musa_seed)
        torch.random.default_generator.manual_seed(cpu_seed)
        runs.append([t.cpu() for t in compiled_calls(x) + (compiled_dropout(x),)])
    for got, want in zip(runs[0][:2], eager):
        assert got.device.type == "cpu" and torch.equal(got, want.cpu())
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1]))  # the CPU's seed changes nothing
    assert not torch.equal(runs[0][2], runs[2][2])  # musa's seed changes the dropout mask
    assert "aten.multinomial" in code and "aten.randperm" in code
    if ON_GPU:
        assert "_KernelRegion" in code


def test_attention_without_dropout_draws_nothing():
    # Fused attention is tagged seeded whatever its dropout: with a constant 0 it draws nothing
    # and compiles as kernel-device code like any op (GPT training graphs have it).
    from torch_musa._inductor.kernel_device_pass import _attention_with_dropout, draws_random_numbers

    graph = torch.fx.Graph()
    q, k, v = (graph.placeholder(n) for n in "qkv")
    flash = torch.ops.aten._scaled_dot_product_flash_attention.default
    efficient = torch.ops.aten._scaled_dot_product_efficient_attention.default
    nodes = [graph.call_function(flash, (q, k, v)), graph.call_function(flash, (q, k, v, 0.0)),
             graph.call_function(efficient, (q, k, v, None, False), {"dropout_p": 0.0}),
             graph.call_function(flash, (q, k, v, 0.1)), graph.call_function(torch.ops.aten.randperm.default, (4,)),
             graph.call_function(torch.ops.aten.mm.default, (q, k))]
    assert [draws_random_numbers(n) for n in nodes] == [False, False, False, True, True, False]
    # With dropout, efficient attention's graphs (both directions) keep musa's path on a GPU.
    backward = torch.ops.aten._scaled_dot_product_flash_attention_backward.default
    grads = [graph.call_function(backward, (q, q, k, v, q, q, None, None, 8, 8, p, True, q, q)) for p in (0.0, 0.1)]
    assert [_attention_with_dropout(n) for n in nodes + grads] == [False, False, False, True, False, False, False, True]


@pytest.mark.parametrize("dynamic", [False, True])
def test_kernel_device_fakes_alias_their_musa_values(dynamic):
    # The pass makes a value's kernel-device fake tensor directly, over the musa value's own
    # storage (the boundary ops share memory), not through the fake mode's dispatch (6x the host
    # time): its metadata is the fake mode's for the same memory, symbolic sizes too, its storage
    # the musa value's, and it adds no guards.
    import torch._inductor.compile_fx  # noqa: F401  (the pass module reads Inductor's prims)
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    from torch_musa._inductor.kernel_device_pass import _over_same_memory

    mode = FakeTensorMode(shape_env=ShapeEnv())
    real = torch.randn(6, 8, device="musa")[1:, ::2]  # offset and strides into a larger storage
    ctx = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * 2) if dynamic else None
    x = mode.from_tensor(real, static_shapes=not dynamic, source=ConstantSource("x"), symbolic_context=ctx)
    assert isinstance(x.shape[0], torch.SymInt) == dynamic
    cpu = torch.device("cpu")
    with mode:  # the same memory through the fake mode: a view into a storage as large as x's
        base = torch.empty(x.untyped_storage().nbytes() // x.element_size(), dtype=x.dtype, device=cpu)
        want = torch.ops.aten.as_strided.default(base, x.size(), x.stride(), x.storage_offset())
    got = _over_same_memory(x, cpu)
    assert isinstance(got, FakeTensor) and got.fake_mode is mode
    assert (got.device, got.dtype, got.shape, got.stride(), got.storage_offset()) == \
        (want.device, want.dtype, want.shape, want.stride(), want.storage_offset())
    assert got.untyped_storage().nbytes() == want.untyped_storage().nbytes()
    assert got.untyped_storage()._cdata == x.untyped_storage()._cdata
    back = _over_same_memory(got, torch.device("musa", 0))  # and back: the musa memory again
    assert back.device == torch.device("musa", 0) and back.untyped_storage()._cdata == x.untyped_storage()._cdata
    assert not mode.shape_env.guards


def test_flash_attention_through_overrideable_trains_under_compile(device):
    # The overrideable attention op (musa's flash attention on the GPU, chosen by
    # F.scaled_dot_product_attention there; called as the op on the host, whose SDPA keeps the
    # CPU's variant) has no kernel-device kernel: it runs on musa inside a kernel-device graph
    # (CUDA or CPU), in both directions, reading the region's buffers it borrows. The results
    # are eager's.
    dtype = torch.float16 if ON_GPU else torch.float32
    q, k, v = (torch.randn(2, 2, 16, 32, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    overrideable = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default

    def attend(q, k, v):
        if ON_GPU:
            return nn.functional.scaled_dot_product_attention(q * 2, k, v, is_causal=True)
        return overrideable(q * 2, k, v, is_causal=True)[0]

    def step(f):
        out = f(q, k, v)
        return [out.detach()] + list(torch.autograd.grad(out.square().sum(), (q, k, v)))

    with flash_attention_only():
        compiled, codes = run_and_get_code(step, torch.compile(attend))
        eager = step(attend)
    for got, want in zip(compiled, eager):
        torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    assert len(codes) == 2 and all("_scaled_dot_product_fused_attention_overrideable" in c for c in codes)
    # both graphs compiled as kernel-device graphs: their results are handed over to musa
    assert all("_from_kernel_device(" in c.split("return (")[-1] for c in codes)


def test_aot_graphs_call_cuda_flash_attention_for_the_overrideable_op():
    # AOTInductor's model on the GPU is a CUDA model, whose C shims have no kernel for the
    # overrideable op: the pass gives such graphs CUDA's flash op, with the same results read.
    from torch._inductor import config
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch_musa._inductor.kernel_device_pass import _flash_for_aot

    fake_mode = FakeTensorMode()
    with fake_mode:
        vals = [torch.empty(2, 2, 16, 32, dtype=torch.float16) for _ in range(3)]

    def graph_with(*extra_reads):
        graph = torch.fx.Graph()
        qkv = [graph.placeholder(n) for n in "qkv"]
        for node, val in zip(qkv, vals):
            node.meta["val"] = val
        attn = graph.call_function(torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default,
                                   tuple(qkv), {"is_causal": True, "scale": 0.5})
        reads = [graph.call_function(operator.getitem, (attn, i)) for i in (0, *extra_reads)]
        graph.output(tuple(reads))
        return graph

    plain, with_state = graph_with(), graph_with(6)
    _flash_for_aot(plain, fake_mode)  # not an AOT compile: unchanged
    assert any(n.target is torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default
               for n in plain.nodes)
    with config.patch(cpp_wrapper=True):
        _flash_for_aot(plain, fake_mode)
        _flash_for_aot(with_state, fake_mode)
    (flash,) = [n for n in plain.nodes if n.op == "call_function" and n.target is not operator.getitem]
    assert flash.target is torch.ops.aten._scaled_dot_product_flash_attention.default
    assert flash.args[3:] == (0.0, True, False) and flash.kwargs == {"scale": 0.5}
    assert [u.target for u in flash.users] == [operator.getitem]
    assert flash.meta["val"][0].shape == (2, 2, 16, 32)
    # a graph that reads the random state (training) keeps the op
    assert any(n.target is torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default
               for n in with_state.nodes)


def test_attention_with_dropout_trains_under_compile(device):
    # GPUs keep fused attention with dropout as one seeded call (its backward replays the
    # forward's draws from the random state it returns): on musa it draws as eager does, so the
    # compiled step equals eager's there (the call stays on musa inside both CUDA graphs). Asked
    # for flash attention, that call is musa's overrideable op. The host's attention decomposes into
    # Inductor's own dropout: the same musa seed gives the same step.
    dtype = torch.float16 if ON_GPU else torch.float32  # (CUDA's flash attention takes half precision)
    q, k, v = (torch.randn(2, 2, 16, 32, device=device, dtype=dtype, requires_grad=True) for _ in range(3))

    def step(f):
        torch.musa.manual_seed(9)
        out = f(q, k, v)
        grads = torch.autograd.grad(out.square().sum(), (q, k, v))
        return [out.detach()] + list(grads)

    def attend(q, k, v):
        return nn.functional.scaled_dot_product_attention(q * 2, k, v, dropout_p=0.25, is_causal=True)

    compiled = torch.compile(attend)
    with flash_attention_only():
        first, codes = run_and_get_code(step, compiled)
        reference = step(attend) if ON_GPU else step(compiled)
    for got, want in zip(first, reference):
        torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    assert len(codes) == 2  # forward and backward
    if ON_GPU:
        assert all("_scaled_dot_product_fused_attention_overrideable" in c for c in codes)
        assert all("_KernelRegion" in c for c in codes)


def test_compiled_optimizer_step_matches_eager(device):
    torch.manual_seed(0)
    params = [torch.randn(8, 8, device=device, requires_grad=True) for _ in range(2)]
    ref = [p.detach().clone().requires_grad_() for p in params]
    for ps in (params, ref):
        for p in ps:
            p.grad = torch.ones_like(p)
    opt, ref_opt = torch.optim.Adam(params, lr=0.1), torch.optim.Adam(ref, lr=0.1)
    step = torch.compile(opt.step)
    for _ in range(2):
        step()
        ref_opt.step()
    for p, r in zip(params, ref):
        torch.testing.assert_close(p, r)


def test_max_autotune_mode_matches_eager(device):
    a, b = torch.randn(64, 32, device=device), torch.randn(32, 48, device=device)
    f = torch.compile(lambda a, b: torch.relu(a @ b) + 1, mode="max-autotune")
    torch.testing.assert_close(f(a, b), torch.relu(a @ b) + 1, rtol=1e-4, atol=1e-4)


def test_reduce_overhead_mode_gives_eager_results(device):
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU()).to(device)
    cmodel = torch.compile(model, mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(4, 8, device=device)
        torch.testing.assert_close(cmodel(x), model(x))


CACHE_PROBE = """
import torch, torch_musa
from torch._dynamo.utils import counters
f = torch.compile(lambda a: (a.tanh() * 3 + 1).sum(1))
x = torch.arange(32.0, device="musa").reshape(4, 8)
torch.testing.assert_close(f(x), (x.tanh() * 3 + 1).sum(1))
print("HITS", counters["inductor"]["fxgraph_cache_hit"], "MISSES", counters["inductor"]["fxgraph_cache_miss"])
"""


def test_second_process_compiles_from_the_cache(run_py, tmp_path):
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
           "TORCH_MUSA_DRIVER": os.environ.get("TORCH_MUSA_DRIVER", "host")}
    first = run_py(CACHE_PROBE, env=env, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "HITS 0 MISSES 1" in first.stdout
    second = run_py(CACHE_PROBE, env=env, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "HITS 1 MISSES 0" in second.stdout


def test_boundary_functions_check_their_arguments(device):
    # Generated code calls the kernel-device boundary directly; a wrong argument is a TypeError
    # naming the function, and a round trip keeps the memory (no copy).
    x = torch.randn(8, device=device)
    k = torch.musa._C._to_kernel_device(x)
    assert k.data_ptr() == x.data_ptr() and k.device.type != "musa"
    back = torch.musa._C._from_kernel_device(k, x.device)
    assert back.device == x.device and back.data_ptr() == x.data_ptr()
    with pytest.raises(TypeError, match="_to_kernel_device: the argument must be a Tensor"):
        torch.musa._C._to_kernel_device(3)
    with pytest.raises(TypeError, match="_from_kernel_device: the second argument must be a torch.device"):
        torch.musa._C._from_kernel_device(k, "musa")
    with pytest.raises(TypeError, match="takes 2 arguments"):
        torch.musa._C._copy_from_kernel_device_(x)


def test_a_musa_op_inside_a_region_leaves_the_values_it_reads_valid(device):
    # Inside a compiled region, a musa op (a random draw, musa's flash attention) reads the
    # region's buffers as musa tensors that hold them: once that musa tensor is gone, the
    # buffer is still the graph's to read, not memory the next musa allocation reuses.
    index = torch.device(device).index or 0
    kernel_device = torch.musa._C._to_kernel_device(torch.empty(1, device=device)).device
    with torch.musa._C._KernelRegion(index):
        buf = torch.full((1024,), 7.0, device=kernel_device)  # lent from musa memory
        musa = torch.ops.torch_musa.borrow_from_kernel_device(buf, index)
        assert musa.device == torch.device(device) and musa.data_ptr() == buf.data_ptr()
        del musa
        torch.full((1024,), 3.0, device=device)
        assert bool((buf == 7).all())
