"""The host driver's direct path (backend/ops/host_direct.cpp): ATen's CPU kernels on musa tensors
themselves, for add/sub/mul/div (functional, in place, out=) and sum. Each case runs the same op on
the same inputs through the direct path and through the delegation (the direct path turned off),
and the results, the errors and what happens to written tensors must agree."""
import gc
import os
import subprocess
import sys

import pytest
import torch

import torch_musa

pytestmark = pytest.mark.skipif(torch.musa.get_driver_name() != "host", reason="host driver only")


def both(fn):
    """fn() through the direct path and through the delegation: (direct, delegated)."""
    assert torch_musa._C._host_direct_enabled()
    direct = fn()
    torch_musa._C._set_host_direct(False)
    try:
        delegated = fn()
    finally:
        torch_musa._C._set_host_direct(True)
    return direct, delegated


def same(a, b):
    assert a.device == b.device and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0, equal_nan=True)


def inputs(dtype):
    g = torch.Generator().manual_seed(0)
    if dtype.is_floating_point or dtype.is_complex:
        a, b = torch.randn(4, 6, generator=g).to(dtype), torch.randn(6, generator=g).to(dtype) + 3
    else:
        a, b = torch.randint(-9, 9, (4, 6), generator=g).to(dtype), torch.randint(1, 9, (6,), generator=g).to(dtype)
    return a.musa(), b.musa()


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


def test_errors_match_the_delegation():
    a, b = inputs(torch.float32)
    cases = [lambda: b.add_(a),  # in place into a smaller tensor
             lambda: a.long().add_(b),  # result type float into a long tensor
             lambda: torch.add(a, b, out=torch.empty(4, 6, device="musa", dtype=torch.int32)),
             lambda: a + torch.randn(4, 6),  # a cpu tensor that is no scalar
             lambda: torch.sub(a > 0, a > 0)]
    for case in cases:
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


def test_fill_matches_the_delegation():
    a, _ = inputs(torch.float32)
    same(*both(lambda: a.clone().fill_(2.5)))
    same(*both(lambda: a.t().clone()[1:].fill_(-1)))
    same(*both(lambda: a.long().fill_(7)))


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
        with pytest.raises(RuntimeError, match="musa:0"):
            a1 + torch.ones(3, device="musa:0")
    code = ("import torch, torch_musa; x = torch.ones(3, device='musa'); n = torch.musa.ops.delegated_op_count(); "
            "x * 2; print(torch.musa.ops.delegated_op_count() - n)")
    env = dict(os.environ, TORCH_MUSA_HOST_DIRECT="0", TORCH_MUSA_DRIVER="host")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"  # switched off: the delegation runs it
    env["TORCH_MUSA_HOST_DIRECT"] = "yes"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "TORCH_MUSA_HOST_DIRECT must be 0 or 1" in bad.stderr
