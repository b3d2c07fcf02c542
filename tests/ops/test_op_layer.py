"""The generic op layer: zero-copy delegation, musa-allocated outputs, views, in-place, out=, counted copies."""
import gc

import pytest
import torch
import torch.nn.functional as F


@pytest.fixture(autouse=True)
def _reset_counts():
    torch.musa.ops.reset_copy_path_counts()
    yield


def _storage_ptr(t):
    return t.untyped_storage().data_ptr()


def test_common_ops_take_no_copy_path_and_match_cpu():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, 16, generator=g), torch.randn(16, 4, generator=g)
    img, w = torch.randn(2, 3, 8, 8, generator=g), torch.randn(5, 3, 3, 3, generator=g)
    cases = {
        "matmul": lambda x, y, i, k: x @ y,
        "softmax": lambda x, y, i, k: torch.softmax(x, -1),
        "layer_norm": lambda x, y, i, k: F.layer_norm(x, (16,)),
        "conv2d": lambda x, y, i, k: F.conv2d(i, k, padding=1),
        "max_pool": lambda x, y, i, k: F.max_pool2d(i, 2),
        "cumsum": lambda x, y, i, k: x.cumsum(0),
        "topk": lambda x, y, i, k: x.topk(3, dim=1).values,
        "where": lambda x, y, i, k: torch.where(x > 0, x, -x),
        "index_select": lambda x, y, i, k: x.index_select(0, torch.tensor([3, 1], device=x.device)),
    }
    before = torch.musa.ops.delegated_op_count()
    for name, fn in cases.items():
        ref = fn(a, b, img, w)
        out = fn(a.musa(), b.musa(), img.musa(), w.musa())
        assert out.device.type == "musa", name
        torch.testing.assert_close(out.cpu(), ref, msg=name)
    assert torch.musa.ops.delegated_op_count() > before
    assert torch.musa.ops.copy_path_counts() == {}


def test_outputs_are_allocated_by_the_musa_allocator():
    x = torch.randn(1024, 256, device="musa")  # 1 MiB
    torch.musa.synchronize()
    gc.collect()  # earlier tests' unreachable musa tensors must not be freed inside the count
    base = torch.musa.memory_allocated()
    y = x * 2  # the CPU kernel's output lands in musa memory
    assert torch.musa.memory_allocated() - base >= x.numel() * 4
    del y
    assert torch.musa.memory_allocated() == base


def test_in_place_returns_the_same_tensor_and_memory():
    x = torch.randn(64, device="musa")
    ptr = x.data_ptr()
    y = x.add_(1.0)
    assert y is x and x.data_ptr() == ptr


def test_views_share_musa_storage():
    x = torch.arange(24.0, device="musa").view(4, 6)
    for v in (x.t(), x[1:], x.unfold(1, 2, 2), x.diagonal(), x.reshape(6, 4)):
        assert v.device.type == "musa"
        assert _storage_ptr(v) == _storage_ptr(x)
    x.unfold(1, 2, 2).mul_(0)
    assert (x == 0).all()


def test_out_writes_musa_memory_and_resizes_like_cuda():
    a, b = torch.randn(8, device="musa"), torch.randn(8, device="musa")
    out = torch.empty(8, device="musa")
    ptr = out.data_ptr()
    torch.add(a, b, out=out)
    assert out.data_ptr() == ptr
    torch.testing.assert_close(out.cpu(), a.cpu() + b.cpu())
    small = torch.empty(0, device="musa")
    torch.mul(a, b, out=small)  # grows: new musa memory, still musa
    assert small.shape == (8,) and small.device.type == "musa"
    torch.testing.assert_close(small.cpu(), a.cpu() * b.cpu())


_CONSTANT = torch.arange(4.0)  # memory the musa allocator never saw


@pytest.fixture(scope="module")
def foreign_output_op():
    lib = torch.library.Library("musa_op_layer_test", "DEF")
    lib.define("constant(Tensor x) -> Tensor")
    # The CPU kernel hands back a tensor that exists before the op runs, so
    # its memory cannot be adopted: the op layer must copy it (and count it).
    lib.impl("constant", lambda x: _CONSTANT, "CPU")
    yield torch.ops.musa_op_layer_test.constant
    lib._destroy()


def test_outputs_that_cannot_be_adopted_are_copied_and_counted(foreign_output_op):
    x = torch.zeros(1, device="musa")
    out = foreign_output_op(x)
    assert out.device.type == "musa"
    torch.testing.assert_close(out.cpu(), _CONSTANT)
    assert _storage_ptr(out) != _CONSTANT.untyped_storage().data_ptr()
    assert torch.musa.ops.copy_path_counts() == {"musa_op_layer_test::constant": 1}


def test_pointwise_ops_on_strided_views_match_cpu_and_write_through():
    # Pointwise ops of the common shapes take the unboxed path (delegation.h):
    # strided and offset views, type promotion and in-place writes into views
    # must behave exactly as on the CPU.
    g = torch.Generator().manual_seed(3)
    base_c = torch.randn(6, 8, generator=g)
    other_c = torch.randn(8, 6, generator=g).t()  # transposed: non-contiguous
    base_m, other_m = base_c.musa(), other_c.musa()
    for fn in (lambda a, b: a[1:, ::2] * b[1:, ::2], lambda a, b: torch.add(a, b, alpha=-0.5),
               lambda a, b: torch.addcmul(a, a, b, value=2.0), lambda a, b: torch.where(a > b, a, b),
               lambda a, b: a.int() + b, lambda a, b: torch.sigmoid(a[:, 3:])):
        torch.testing.assert_close(fn(base_m, other_m).cpu(), fn(base_c, other_c))
    # in place through a strided view: the base sees it, nothing else moves
    view_c, view_m = base_c[::2, 1::3], base_m[::2, 1::3]
    ptr = base_m.data_ptr()
    view_c.mul_(other_c[::2, 1::3]).add_(1.5)
    view_m.mul_(other_m[::2, 1::3]).add_(1.5)
    assert base_m.data_ptr() == ptr
    torch.testing.assert_close(base_m.cpu(), base_c)
    # a broadcast that would resize self is refused, as on the CPU
    with pytest.raises(RuntimeError):
        base_m[:1].mul_(other_m)


def test_long_tensor_lists_with_shared_storages_and_repeats_match_cpu():
    # Calls with hundreds of tensors (foreach, fused optimizers) look their aliases up through a
    # hash index (delegation.h PointerIndex) instead of scans: views of one storage, a tensor
    # passed twice, and in-place writes must still behave as on the CPU, call after call (the
    # second call reuses cached aliases).
    g = torch.Generator().manual_seed(5)
    base_c = torch.randn(200, 7, generator=g)
    own_c = [torch.randn(5, generator=g) for _ in range(60)]
    base_m, own_m = base_c.musa(), [t.musa() for t in own_c]
    rows = lambda base: [base[i] for i in range(0, 200, 2)]  # 100 views of one storage
    for _ in range(2):
        lhs_c, lhs_m = rows(base_c) + own_c, rows(base_m) + own_m
        # (the other list must not alias the written one: CPU and CUDA kernels order such overlaps differently)
        rhs_c = [t * 0.5 for t in rows(base_c)[::-1]] + [t * 1.0 for t in own_c[::-1]]
        rhs_m = [t * 0.5 for t in rows(base_m)[::-1]] + [t * 1.0 for t in own_m[::-1]]
        torch._foreach_add_(lhs_c, rhs_c, alpha=0.25)
        torch._foreach_add_(lhs_m, rhs_m, alpha=0.25)
        torch.testing.assert_close(base_m.cpu(), base_c)
        for a, b in zip(own_m, own_c):
            torch.testing.assert_close(a.cpu(), b)
    rep_c, rep_m = own_c[:30] + own_c[:30], own_m[:30] + own_m[:30]  # each tensor twice
    for a, b in zip(torch._foreach_mul(rep_m, 3.0), torch._foreach_mul(rep_c, 3.0)):
        torch.testing.assert_close(a.cpu(), b)
    # a fused optimizer step over many parameters, against the CPU's kernel
    params_c = [torch.randn(3, 4, generator=g) for _ in range(40)]
    grads_c = [torch.randn(3, 4, generator=g) for _ in range(40)]
    state_c = [[torch.zeros(3, 4) for _ in range(40)] for _ in range(2)]
    steps_c = [torch.zeros(()) for _ in range(40)]
    mv = lambda ts: [t.musa() for t in ts]
    params_m, grads_m, state_m, steps_m = mv(params_c), mv(grads_c), [mv(s) for s in state_c], mv(steps_c)
    for ps, gs, (m, v), st in ((params_c, grads_c, state_c, steps_c), (params_m, grads_m, state_m, steps_m)):
        for _ in range(2):
            torch._foreach_add_(st, 1.0)
            torch._fused_adamw_(ps, gs, m, v, [], st, lr=1e-2, beta1=0.9, beta2=0.99, weight_decay=0.1,
                                eps=1e-8, amsgrad=False, maximize=False)
    for a, b in zip(params_m + state_m[0] + state_m[1], params_c + state_c[0] + state_c[1]):
        torch.testing.assert_close(a.cpu(), b)
    # Adam with GradScaler's optional tensors (the unboxed path's Tensor? arguments)
    scale_c, inf_c = torch.tensor(4.0), torch.tensor(0.0)
    scale_m, inf_m = scale_c.musa(), inf_c.musa()
    torch._fused_adam_(params_c, grads_c, *state_c, [], steps_c, lr=1e-2, beta1=0.9, beta2=0.99, weight_decay=0.0,
                       eps=1e-8, amsgrad=False, maximize=True, grad_scale=scale_c, found_inf=inf_c)
    torch._fused_adam_(params_m, grads_m, *state_m, [], steps_m, lr=1e-2, beta1=0.9, beta2=0.99, weight_decay=0.0,
                       eps=1e-8, amsgrad=False, maximize=True, grad_scale=scale_m, found_inf=inf_m)
    for a, b in zip(params_m + state_m[0], params_c + state_c[0]):
        torch.testing.assert_close(a.cpu(), b)


def test_in_place_foreach_calls_are_delegated_whole_and_follow_changing_lists():
    # An in-place foreach call is one delegation (its kernel-device aliases kept from the call
    # before, as an optimizer passes the same lists every step), not one per tensor. The kept
    # aliases must follow lists whose elements change between calls: a gradient replaced by a
    # new tensor, an element of another size at the same place, a shorter list.
    g = torch.Generator().manual_seed(7)
    sizes = [(4, 3), (5,), (2, 2, 2), (7,)]
    p_c = [torch.randn(s, generator=g) for s in sizes]
    p_m = [t.musa() for t in p_c]
    for step in range(4):
        if step == 2:  # the third element becomes another tensor of another size
            p_c[2] = torch.randn(3, 3, generator=g)
            p_m[2] = p_c[2].musa()
        lists_c = p_c if step < 3 else p_c[:3]
        lists_m = p_m if step < 3 else p_m[:3]
        g_c = [torch.randn(t.shape, generator=g) for t in lists_c]  # new gradients every step
        g_m = [t.musa() for t in g_c]
        scal = [0.5 + i for i in range(len(lists_c))]
        for ps, gs in ((lists_c, g_c), (lists_m, g_m)):
            before = torch.musa.ops.delegated_op_count()
            torch._foreach_mul_(ps, 0.99)
            torch._foreach_lerp_(ps, gs, 0.1)
            torch._foreach_addcmul_(ps, gs, gs, value=0.01)
            torch._foreach_div_(ps, scal)
            torch._foreach_add_(ps, gs, alpha=-0.5)
            if ps is lists_m:
                assert torch.musa.ops.delegated_op_count() - before == 5
        for a, b in zip(p_m, p_c):
            torch.testing.assert_close(a.cpu(), b)
    # a list spanning devices takes torch's per-tensor path, as on cuda: each tensor on its own
    mixed, ref = [p_m[0], p_c[1].clone()], [p_c[0].clone(), p_c[1].clone()]
    torch._foreach_mul_(mixed, 3.0)
    torch._foreach_mul_(ref, 3.0)
    assert mixed[0].device.type == "musa" and mixed[1].device.type == "cpu"
    for a, b in zip(mixed, ref):
        torch.testing.assert_close(a.cpu(), b)


def test_functional_foreach_calls_are_delegated_whole():
    # Adam's _foreach_sqrt, clipping's _foreach_mul...: one delegation per call, new musa tensors
    # with the CPU's values; a list spanning devices still runs per tensor, as on cuda.
    g = torch.Generator().manual_seed(3)
    xs_c = [torch.rand(s, generator=g) + 0.5 for s in [(4, 3), (5,), (2, 2, 2)]]
    ys_c = [torch.rand(t.shape, generator=g) for t in xs_c]
    xs_m, ys_m = [t.musa() for t in xs_c], [t.musa() for t in ys_c]
    calls = [lambda xs, ys: torch._foreach_sqrt(xs),
             lambda xs, ys: torch._foreach_mul(xs, 0.5),
             lambda xs, ys: torch._foreach_div(xs, [1.0, 2.0, 4.0]),
             lambda xs, ys: torch._foreach_add(xs, ys, alpha=-2),
             lambda xs, ys: torch._foreach_addcdiv(xs, ys, xs, value=0.25),
             lambda xs, ys: torch._foreach_lerp(xs, ys, 0.3)]
    for call in calls:
        before = torch.musa.ops.delegated_op_count()
        got = call(xs_m, ys_m)
        assert torch.musa.ops.delegated_op_count() - before == 1
        want = call(xs_c, ys_c)
        assert all(t.device.type == "musa" for t in got)
        for a, b in zip(got, want):
            torch.testing.assert_close(a.cpu(), b)
        assert all(a.data_ptr() != x.data_ptr() for a, x in zip(got, xs_m))  # new tensors, inputs kept
    for a, b in zip(xs_m, xs_c):
        torch.testing.assert_close(a.cpu(), b)
    mixed = torch._foreach_sqrt([xs_m[0], xs_c[1]])
    assert [t.device.type for t in mixed] == ["musa", "cpu"]
    torch.testing.assert_close(mixed[0].cpu(), xs_c[0].sqrt())


def test_lent_block_freed_by_another_thread_is_freed_when_the_op_ends():
    # (review finding) a block the kernel device borrowed on one thread and
    # dropped on another while the op runs: neither the wrong deleter nor a leak
    released, during, after = torch.musa._C._check_lent_block_released_elsewhere()
    assert released
    assert during >= 1 << 20  # still allocated: the lending op has not ended
    assert after == 0


def _active_blocks():
    return {b["address"]: b for seg in torch.musa.memory_snapshot() for b in seg["blocks"]
            if b["state"] == "active_allocated"}


@pytest.mark.parametrize("op", [lambda x: x * 2, lambda x: x.sum(0), lambda x: torch.mm(x[:64], x[:64].t())],
                         ids=["mul", "sum", "mm"])
def test_an_op_leaves_no_musa_allocation_behind(op):
    # as torch.cuda: once the result is dropped, memory_allocated() is back where it was; a failure
    # lists what is left, with the frames that allocated it
    x = torch.randn(1024, 256, device="musa")
    op(x)  # (first-use setup of the op's kernels is not what this measures)
    # frees owed by earlier tests (garbage cycles, blocks waiting on a stream's event, as torch.cuda
    # keeps them) must not land inside the measured op
    gc.collect()
    gc.disable()  # (a collection inside the window would free an earlier test's garbage there)
    torch.musa.synchronize()
    torch.musa.empty_cache()
    before, base = _active_blocks(), torch.musa.memory_allocated()
    torch.musa.memory._record_memory_history(context="alloc", stacks="python")
    try:
        y = op(x)
        del y
        torch.musa.synchronize()
        left = [(b["size"], [f"{f['filename']}:{f['line']} {f['name']}" for f in b["frames"]][:8])
                for addr, b in _active_blocks().items() if addr not in before]
        assert torch.musa.memory_allocated() == base, left
    finally:
        gc.enable()
        torch.musa.memory._record_memory_history(enabled=None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.complex64, torch.int32, torch.uint8, torch.bool])
def test_new_memory_is_filled_in_deterministic_mode_as_on_cpu(dtype):
    # torch.use_deterministic_algorithms(True) fills uninitialized memory (NaN, or the integer
    # maximum) in every factory that returns it, as CUDA's and the CPU's do.
    factories = {
        "empty": lambda d: torch.empty(5, dtype=dtype, device=d),
        "empty_strided": lambda d: torch.empty_strided((2, 3), (1, 2), dtype=dtype, device=d),
        "empty_like": lambda d: torch.empty_like(torch.zeros(4, dtype=dtype, device=d)),
        "new_empty": lambda d: torch.zeros(2, device=d).new_empty((3,), dtype=dtype),
    }
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for name, make in factories.items():
            torch.testing.assert_close(make("musa").cpu(), make("cpu"), equal_nan=True, msg=name)
    finally:
        torch.use_deterministic_algorithms(before)
    assert not torch.isnan(torch.zeros(3, device="musa")).any()
