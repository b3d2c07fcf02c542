"""The host driver's direct path (backend/ops/host_direct/): ATen's CPU kernels on musa tensors
themselves. Each case runs the same op on the same inputs through the direct path, through the
delegation (the direct path turned off) and on the CPU: the results, the errors and what happens to
written tensors must agree, and the direct path must not have delegated."""
import gc
import os
import subprocess
import sys

import pytest
import torch

import torch_musa

pytestmark = [pytest.mark.skipif(torch.musa.get_driver_name() != "host", reason="host driver only"),
              pytest.mark.skipif(os.environ.get("TORCH_MUSA_HOST_DIRECT") == "0", reason="direct path off")]


def delegated_path(fn):
    torch_musa._C._set_host_direct(False)
    try:
        return fn()
    finally:
        torch_musa._C._set_host_direct(True)


def both(fn):
    """fn() through the direct path and through the delegation: (direct, delegated)."""
    assert torch_musa._C._host_direct_enabled()
    return fn(), delegated_path(fn)


def same(a, b):
    assert a.device == b.device and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0, equal_nan=True)


def to(device, args):
    return [a.to(device) if isinstance(a, torch.Tensor) else
            [t.to(device) for t in a] if isinstance(a, list) else a for a in args]


def three(fn, *args, direct=True):
    """fn(*args) on musa by both paths and on the CPU: all alike; `direct`: no delegation on the direct path."""
    margs = to("musa", args)
    before = torch.musa.ops.delegated_op_count()
    d = fn(*margs)
    if direct:
        assert torch.musa.ops.delegated_op_count() == before, "the direct path delegated"
    same(d, delegated_path(lambda: fn(*margs)))
    c = fn(*to("cpu", args))
    assert d.dtype == c.dtype and d.shape == c.shape and d.stride() == c.stride()
    torch.testing.assert_close(d.cpu(), c, rtol=0, atol=0, equal_nan=True)
    return d


def inputs(dtype):
    g = torch.Generator().manual_seed(0)
    if dtype.is_floating_point or dtype.is_complex:
        a, b = torch.randn(4, 6, generator=g).to(dtype), torch.randn(6, generator=g).to(dtype) + 3
    else:
        a, b = torch.randint(-9, 9, (4, 6), generator=g).to(dtype), torch.randint(1, 9, (6,), generator=g).to(dtype)
    return a.musa(), b.musa()


def raises_alike(case):
    """case() raises the same RuntimeError through both paths."""
    msgs = []
    for on in (True, False):
        torch_musa._C._set_host_direct(on)
        try:
            with pytest.raises(RuntimeError) as e:
                case()
            msgs.append(str(e.value))
        finally:
            torch_musa._C._set_host_direct(True)
    assert msgs[0] == msgs[1]
    return msgs[0]


OPS = {"add": lambda a, b, **k: torch.add(a, b, alpha=2, **k), "sub": lambda a, b, **k: torch.sub(a, b, **k),
       "mul": torch.mul, "div": torch.div}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.complex64])
@pytest.mark.parametrize("op", list(OPS))
def test_binary_forms_match_the_delegation(op, dtype):
    fn = OPS[op]
    a, b = inputs(dtype)
    if op == "div" and not (dtype.is_floating_point or dtype.is_complex):
        same(*both(lambda: fn(a, b)))  # int / int computes in float: the delegation takes it
        return
    same(*both(lambda: fn(a, b)))  # broadcast
    same(*both(lambda: fn(a.t().contiguous().t(), b)))  # non-contiguous
    same(*both(lambda: fn(a, 3)))  # python scalar (a wrapped 0-dim cpu tensor of another dtype)
    same(*both(lambda: fn(a, 1.0001)))  # (a reduced float type reads the scalar in float, as the CPU)
    same(*both(lambda: fn(b, torch.tensor(2, dtype=dtype))))  # 0-dim cpu tensor
    other = torch.complex128 if dtype.is_complex else torch.float64 if dtype == torch.float32 else torch.float32
    same(*both(lambda: fn(a, b.to(other))))  # mixed dtypes

    def in_place():
        x = a.clone()
        v = x._version
        ptr = x.data_ptr()
        getattr(x, op + "_")(b)
        assert x._version == v + 1 and x.data_ptr() == ptr
        return x
    same(*both(in_place))

    def out_resized():
        out = torch.empty(0, device="musa", dtype=dtype)
        r = fn(a, b, out=out)
        assert r is out
        return out
    same(*both(out_resized))

    def out_view():  # a view is written through, its base sees it
        base = torch.zeros(4, 12, device="musa", dtype=dtype)
        fn(a, b, out=base[:, ::2])
        return base
    same(*both(out_view))


def _rand(*shape, dtype=torch.float32, low=None):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    t = torch.randn(*shape, generator=g)
    return (t.abs() + 0.5 if low == "positive" else t).to(dtype)


UNARY = ["neg", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "sin", "cos", "reciprocal", "sign", "exp2", "log2",
         "erf", "relu", "nn.functional.silu", "nn.functional.leaky_relu"]


def _fn(name):
    mod = torch
    for part in name.split("."):
        mod = getattr(mod, part)
    return mod


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unary_ops_match_the_cpu(dtype):
    x = _rand(5, 7, dtype=dtype)
    pos = _rand(5, 7, dtype=dtype, low="positive")
    for name in UNARY:
        fn = _fn(name)
        arg = pos if name in ("log", "sqrt", "rsqrt", "log2") else x
        three(fn, arg)
        three(fn, arg.t())  # non-contiguous: the output keeps the input's layout
        if name.startswith("nn."):
            continue

        def in_place(t, name=name):
            getattr(t, name + "_")()
            return t
        three(lambda t: in_place(t.clone()), arg)
        if name == "relu":
            continue
        three(lambda t: getattr(torch, name)(t, out=torch.empty(0, dtype=dtype, device=t.device)), arg)


def test_comparisons_clamp_and_friends_match_the_cpu():
    a, b = _rand(4, 6), _rand(6)
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        fn = getattr(torch, op)
        three(fn, a, b)
        three(fn, a, 0.25)  # the Scalar overload
        three(lambda x: fn(x, torch.tensor(0.25, dtype=torch.float64)), a)  # a 0-dim cpu tensor, another dtype
        three(lambda x, y: fn(x, y, out=torch.empty(0, dtype=torch.bool, device=x.device)), a, b)
        three(lambda x, y: getattr(x.clone(), op + "_")(y), a, b)  # in place: float results
    three(lambda x: x.clamp(-0.5, 0.5), a)
    three(lambda x: x.clamp(min=0.1), a)
    three(lambda x: x.clamp(max=torch.tensor(0.0, device=x.device)), a)
    three(lambda x, lo: x.clamp(lo, lo + 1), a, b)
    three(lambda x: x.clamp_min(0.0), a)
    three(lambda x: x.clone().clamp_max_(0.2), a)
    three(torch.maximum, a, b)
    three(torch.minimum, a, b)
    three(lambda x: x.pow(2.5), a.abs())
    three(torch.pow, a.abs(), b)
    three(lambda x, y: torch.lerp(x, y, 0.3), a, b)
    three(lambda x, y: torch.lerp(x, y, torch.full_like(y, 0.7)), a, b)
    three(lambda x, y: torch.addcmul(x, x, y, value=0.5), a, b)
    three(lambda x, y: x.clone().addcdiv_(x, y, value=-2), a, b)
    three(lambda x: torch.where(x > 0, x, x * 3), a)
    three(lambda x, y: torch.where(x > 0, x, y), a, b)
    three(lambda x: x.clone().fill_(1.5), a)
    three(lambda x: x[:1, :1].clone().fill_(-2), a)  # one element: written without a TensorIterator
    three(lambda x: x[0, 0].clone().fill_(True), a.to(torch.bfloat16))
    # int tensors clamped by a float: computed in float, as on the CPU
    three(lambda x: x.clamp(-2.5, 2.5), torch.arange(-4, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.bool])
def test_sum_matches_the_delegation(dtype):
    a, _ = inputs(dtype if dtype != torch.bool else torch.int64)
    a = a > 0 if dtype == torch.bool else a
    same(*both(lambda: a.sum()))
    same(*both(lambda: a.sum(1)))
    same(*both(lambda: a.t().sum(0, keepdim=True)))
    same(*both(lambda: a.sum((0, 1), dtype=torch.float64)))
    same(*both(lambda: a[:, :0].sum(1)))  # empty reduction

    def out():
        o = torch.empty(0, device="musa", dtype=a.sum(0).dtype)
        torch.sum(a, 0, out=o)
        return o
    same(*both(out))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_mean_matches_the_cpu(dtype):
    a = _rand(6, 5, 4, dtype=dtype)
    three(lambda x: x.mean(), a)
    three(lambda x: x.mean(1), a)
    three(lambda x: x.mean((0, -1), keepdim=True), a)
    three(lambda x: x.transpose(0, 2).mean(0), a)
    three(lambda x: x.mean(1, dtype=torch.float64), a)
    three(lambda x: torch.mean(x, 1, out=torch.empty(0, dtype=dtype, device=x.device)), a,
          direct=dtype not in (torch.float16, torch.bfloat16))  # (half out=: delegated, see reductions.cpp)
    assert "mean" in raises_alike(lambda: torch.arange(4, device="musa").mean())  # the CPU's dtype check


def test_indexing_and_cat_match_the_cpu():
    a, b = _rand(5, 6), _rand(3, 6)
    idx = torch.tensor([4, 0, 0, 2])
    three(lambda x, i: x.index_select(0, i), a, idx)
    three(lambda x, i: x.index_select(1, i), a, idx)
    three(lambda x, i: x.t().index_select(0, i), a, idx)
    three(lambda x, i: x[0].index_select(0, i), a, idx)
    three(lambda x, i: torch.index_select(x, 0, i, out=torch.empty(0, device=x.device)), a, idx)
    three(lambda x, i: x.index_select(0, i), a, idx.int())
    three(lambda x, y: torch.cat([x, y]), a, b)
    three(lambda x, y: torch.cat([x.t(), y.t()], 1), a, b)  # strided inputs
    three(lambda x, y: torch.cat([x, y, x], -2), a.to(torch.bfloat16), b.to(torch.bfloat16))
    three(lambda x, y: torch.cat([x, y], out=torch.empty(0, device=x.device)), a, b)
    three(lambda x, y: torch.cat([x, y.double()]), a, b, direct=False)  # mixed dtypes: the delegation
    three(lambda x: torch.cat([x, torch.empty(0, device=x.device)]), a)  # the legacy empty 1-D input
    with pytest.raises(IndexError):
        x = torch.ones(3, device="musa")
        x.index_select(0, torch.tensor([3], device="musa"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_and_gather_match_the_cpu(dtype):
    a = _rand(4, 5, 6, dtype=dtype)
    for dim in (-1, 1, 0):
        three(lambda x: x.softmax(dim), a)
        three(lambda x: x.log_softmax(dim), a)
        three(lambda x: torch._softmax(x, dim, False, out=torch.empty(0, dtype=dtype, device=x.device)), a)

    def grads(x, fn):
        x = x.clone().requires_grad_()
        fn(x).pow(2).sum().backward()
        return x.grad
    three(lambda x: grads(x, lambda t: t.softmax(-1)), a)
    three(lambda x: grads(x, lambda t: t.log_softmax(1)), a)
    idx = torch.tensor([[[0, 2], [1, 1], [4, 0], [3, 3], [2, 1]]] * 4)
    three(lambda x, i: torch.gather(x, 2, i), a, idx)
    three(lambda x, i: torch.gather(x.transpose(0, 1), 0, i[:, :1].transpose(0, 1)), a, idx)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_matrix_products_match_the_cpu(dtype):
    a, b, c = _rand(8, 5).to(dtype), _rand(5, 3).to(dtype), _rand(3).to(dtype)
    three(torch.mm, a, b)
    three(torch.mm, a.t().contiguous().t(), b.t().contiguous().t())  # transposed operands
    three(torch.addmm, c, a, b)
    three(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=2), c, a, b)
    three(lambda s, x, y: s.expand(8, 3).clone().addmm_(x, y), c, a, b)
    three(lambda x, y: torch.mm(x, y, out=torch.empty(0, dtype=dtype, device=x.device)), a, b)
    p, q = _rand(2, 4, 5).to(dtype), _rand(2, 5, 3).to(dtype)
    three(torch.bmm, p, q)
    three(lambda s, x, y: torch.baddbmm(s, x, y, alpha=0.5), _rand(2, 4, 3).to(dtype), p, q)
    three(torch.mm, a[:, :0], b[:0], direct=False)  # k == 0: the CPU zeroes the output (zero_: delegated)


def test_copies_match_the_cpu():
    a = _rand(7, 9)
    three(lambda x: x.t().contiguous(), a)
    three(lambda x: x.to(torch.float64), a)
    three(lambda x: x.to(torch.int32), a * 10)
    three(lambda x: x.to(torch.bfloat16), a)
    three(lambda x: torch.empty(7, 9, dtype=torch.float64, device=x.device).copy_(x[0]), a)  # broadcast
    three(lambda x: x.t().contiguous(), _rand(70, 80))  # the CPU's blocked transpose: the copy path
    three(lambda x: x.half(), a)  # float -> half: the CPU's FBGEMM conversion, by the copy path
    three(lambda x: x.conj().clone(), _rand(3, 4).to(torch.complex64))

    def resized(x):
        y = x.clone()
        y.resize_(100)
        y[63:] = 2
        return y[:63]
    three(resized, a)


def test_errors_match_the_delegation():
    a, b = inputs(torch.float32)
    cases = [lambda: b.add_(a),  # in place into a smaller tensor
             lambda: a.long().add_(b),  # result type float into a long tensor
             lambda: torch.add(a, b, out=torch.empty(4, 6, device="musa", dtype=torch.int32)),
             lambda: a + torch.randn(4, 6),  # a cpu tensor that is no scalar
             lambda: torch.sub(a > 0, a > 0),
             lambda: torch.mm(a, a),  # shapes
             lambda: torch.mm(a, a.t().long()),  # dtypes
             lambda: torch.mm(a, a.t(), out=torch.empty(0, device="musa", dtype=torch.int64)),  # out= dtype
             lambda: torch.cat([a, b]),
             lambda: torch.exp(a, out=torch.empty(0, device="musa", dtype=torch.int64)),
             lambda: a.clamp(),
             lambda: torch.zeros(1, dtype=torch.int8, device="musa").fill_(300),  # overflow
             lambda: torch.mm(a, a.t().cpu()),  # device mismatch
             lambda: torch.where(a > 0, a, a.cpu())]
    if torch.musa.device_count() > 1:
        a1 = a.to("musa:1")
        cases += [lambda: torch.mm(a, a1.t()), lambda: torch.cat([a, a1]), lambda: a.index_select(0, a1.long()[0]),
                  lambda: torch.exp(a, out=torch.empty(0, device="musa:1")), lambda: a.lt(a1)]
    for case in cases:
        raises_alike(case)
    assert "Expected out tensor to have dtype" in raises_alike(cases[7])


def test_in_place_on_views_matches_the_cpu():
    def run(device):
        base = torch.arange(48, dtype=torch.float32, device=device).reshape(6, 8) / 7
        v = base[1:, ::2]
        version = base._version
        v.exp_()
        base.t()[2:5].clamp_(0.5, 2.0)
        base[0].addcmul_(base[1], base[2], value=0.25)
        base[:, 3].masked_fill_(base[:, 3] > 1, 0.0)
        base[2:4].copy_(base[4:6].t().contiguous().t())
        torch.mul(base[0], 2, out=base[5])
        assert base._version > version
        return base
    direct = run("musa")
    same(direct, delegated_path(lambda: run("musa")))
    torch.testing.assert_close(direct.cpu(), run("cpu"), rtol=0, atol=0)


def test_autograd_through_direct_ops_matches_the_cpu():
    def step(device, forward_direct=False):
        g = torch.Generator().manual_seed(0)
        w1 = torch.randn(6, 8, generator=g).to(device).requires_grad_()
        w2 = torch.randn(16, 3, generator=g).to(device).requires_grad_()
        bias = torch.randn(3, generator=g).to(device).requires_grad_()
        x = torch.randn(5, 6, generator=g).to(device)
        idx = torch.arange(7, -1, -1).to(device)
        before = torch.musa.ops.delegated_op_count()
        h = torch.relu(x @ w1)
        h = torch.cat([torch.tanh(h), torch.sigmoid(h).index_select(1, idx)], 1)
        y = torch.addmm(bias, torch.where(h > 0.1, h, h.clamp(min=-0.2)), w2)
        loss = (y.exp() - y.mean(0)).pow(2).mean()
        if forward_direct:
            assert torch.musa.ops.delegated_op_count() == before
        loss.backward()  # (index_select's backward, index_add and zero_, is delegated)
        return [loss, w1.grad, w2.grad, bias.grad]
    direct = step("musa", forward_direct=True)
    for d, e, c in zip(direct, delegated_path(lambda: step("musa")), step("cpu")):
        same(d, e)
        torch.testing.assert_close(d.cpu(), c, rtol=0, atol=0)


def test_direct_path_skips_the_delegation_and_keeps_musa_memory():
    a, b = inputs(torch.float32)
    before = torch.musa.ops.delegated_op_count()
    y = a * b
    a.add_(1.0)
    s = y.sum()
    y.fill_(0)
    assert torch.musa.ops.delegated_op_count() == before
    assert y.device.type == "musa" and s.device.type == "musa"
    torch.musa.synchronize()
    gc.collect()  # earlier tests' unreachable musa tensors must not be freed inside the count
    base = torch.musa.memory_allocated()
    z = a * b  # the output is musa memory
    assert torch.musa.memory_allocated() - base >= z.numel() * 4
    del z
    assert torch.musa.memory_allocated() == base
    torch_musa._C._set_host_direct(False)
    try:
        a * b
        assert torch.musa.ops.delegated_op_count() == before + 1
    finally:
        torch_musa._C._set_host_direct(True)


def test_devices_and_the_environment_switch():
    if torch.musa.device_count() > 1:  # an op on device 1 from device 0: its output on device 1
        a1 = torch.ones(3, device="musa:1")
        assert (a1 * 2).device == torch.device("musa:1") and a1.sum().device == torch.device("musa:1")
        m1 = torch.ones(2, 2, device="musa:1")
        assert (m1 @ m1).device == m1.device and torch.cat([m1, m1]).device == m1.device
        grown = torch.empty(0, device="musa:1").resize_(64)  # grown in device 1's memory
        assert grown.device == m1.device and torch.musa.memory_allocated(1) > 0
        with pytest.raises(RuntimeError, match="musa:0"):
            a1 + torch.ones(3, device="musa:0")
    code = ("import torch, torch_musa; x = torch.ones(3, device='musa'); n = torch.musa.ops.delegated_op_count(); "
            "x * 2; x.exp(); x @ x; print(torch.musa.ops.delegated_op_count() - n)")
    env = dict(os.environ, TORCH_MUSA_HOST_DIRECT="0", TORCH_MUSA_DRIVER="host")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3"  # switched off: the delegation runs them
    env["TORCH_MUSA_HOST_DIRECT"] = "yes"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "TORCH_MUSA_HOST_DIRECT must be 0 or 1" in bad.stderr
