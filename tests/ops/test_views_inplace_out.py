"""Views share storage, in-place ops, out= and non-contiguous inputs behave as on CPU."""
import pytest
import torch


def _both(shape=(4, 6), seed=0):
    c = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return c, c.musa()


VIEW_FNS = {
    "view": lambda t: t.view(6, 4),
    "reshape": lambda t: t.reshape(3, 8),
    "transpose": lambda t: t.transpose(0, 1),
    "t": lambda t: t.t(),
    "permute": lambda t: t.unsqueeze(0).permute(2, 0, 1),
    "slice": lambda t: t[1:3, 2:],
    "step_slice": lambda t: t[:, ::2],
    "select": lambda t: t[2],
    "narrow": lambda t: t.narrow(1, 1, 3),
    "as_strided": lambda t: t.as_strided((3, 3), (6, 1), 1),
    "expand": lambda t: t[0:1].expand(5, 6),
    "diagonal": lambda t: t.diagonal(),
    "unfold": lambda t: t.unfold(1, 2, 2),
    "split": lambda t: t.split(2, dim=1)[1],
    "chunk": lambda t: t.chunk(2)[0],
    "unbind": lambda t: t.unbind(1)[3],
    "flatten": lambda t: t.flatten(),
    "movedim": lambda t: t.movedim(0, 1),
    "squeeze_unsqueeze": lambda t: t.unsqueeze(1).squeeze(1),
}


@pytest.mark.parametrize("name", sorted(VIEW_FNS))
def test_views_share_storage_and_match_cpu(name):
    f = VIEW_FNS[name]
    c, m = _both()
    vc, vm = f(c), f(m)
    assert vm.is_musa
    assert vm._is_view() and vm._base is m
    assert vm.untyped_storage().data_ptr() == m.untyped_storage().data_ptr()
    assert vm.shape == vc.shape and vm.stride() == vc.stride() and vm.storage_offset() == vc.storage_offset()
    torch.testing.assert_close(vm.cpu(), vc)
    if name != "expand":
        # writing through the view changes the base, as on CPU
        vc.mul_(-2)
        vm.mul_(-2)
        torch.testing.assert_close(m.cpu(), c)


def test_view_as_real_complex():
    c = torch.randn(3, 2, dtype=torch.complex64)
    m = c.musa()
    r = torch.view_as_real(m)
    assert r.untyped_storage().data_ptr() == m.untyped_storage().data_ptr()
    torch.testing.assert_close(r.cpu(), torch.view_as_real(c))
    r[:, :, 0].fill_(1.0)
    assert torch.equal(m.real.cpu(), torch.ones(3, 2))


def test_contiguous_copies_only_when_needed():
    _, m = _both()
    assert m.contiguous() is m
    t = m.t()
    tc = t.contiguous()
    assert tc.is_contiguous() and tc.data_ptr() != m.data_ptr()
    assert torch.equal(tc.cpu(), m.cpu().t())


INPLACE = {
    "add_": lambda t, o: t.add_(o, alpha=2),
    "mul_": lambda t, o: t.mul_(o),
    "clamp_": lambda t, o: t.clamp_(-0.5, 0.5),
    "copy_": lambda t, o: t.copy_(o),
    "fill_": lambda t, o: t.fill_(3.0),
    "zero_": lambda t, o: t.zero_(),
    "masked_fill_": lambda t, o: t.masked_fill_(o > 0, -1.0),
    "index_add_": lambda t, o: t.index_add_(0, torch.tensor([0, 2], device=t.device), o[:2]),
    "scatter_": lambda t, o: t.scatter_(1, torch.zeros(4, 1, dtype=torch.long, device=t.device), 7.0),
    "addcmul_": lambda t, o: t.addcmul_(o, o, value=0.5),
    "lerp_": lambda t, o: t.lerp_(o, 0.3),
    "exp_": lambda t, o: t.exp_(),
    "index_put_": lambda t, o: t.index_put_((torch.tensor([1, 3], device=t.device),), o[0], accumulate=True),
    "setitem": lambda t, o: t.__setitem__((slice(None), slice(1, 3)), o[:, :2]),
}


@pytest.mark.parametrize("noncontig", [False, True], ids=["contig", "noncontig"])
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_matches_cpu_and_keeps_storage(name, noncontig):
    f = INPLACE[name]
    c, m = _both()
    oc, om = _both(seed=1)
    if noncontig:
        # operate on a strided view of a bigger tensor
        bc, bm = _both((6, 8), seed=2)
        bm_ref = bm
        c, m = bc[:4, 1:7], bm[:4, 1:7]
        assert not m.is_contiguous()
    ptr = m.data_ptr()
    rc, rm = f(c, oc), f(m, om)
    assert m.data_ptr() == ptr
    if rm is not None:
        assert rm is m
    torch.testing.assert_close(m.cpu(), c)
    if noncontig:
        torch.testing.assert_close(bm_ref.cpu(), bc)  # the rest of the base is untouched


OUT_FNS = {
    "add": lambda a, b, out: torch.add(a, b, out=out),
    "mul": lambda a, b, out: torch.mul(a, b, out=out),
    "matmul": lambda a, b, out: torch.matmul(a, b.t(), out=out),
    "exp": lambda a, b, out: torch.exp(a, out=out),
    "where": lambda a, b, out: torch.where(a > b, a, b, out=out),
    "clamp": lambda a, b, out: torch.clamp(a, min=-0.1, out=out),
    "sum": lambda a, b, out: torch.sum(a, 0, out=out),
    "cumsum": lambda a, b, out: torch.cumsum(a, 1, out=out),
}


@pytest.mark.parametrize("name", sorted(OUT_FNS))
def test_out_variants_write_given_tensor(name):
    f = OUT_FNS[name]
    ac, am = _both((4, 4))
    bc, bm = _both((4, 4), seed=1)
    ref = f(ac, bc, torch.empty(0))
    out = torch.empty(ref.shape, device="musa")
    ptr = out.data_ptr()
    res = f(am, bm, out)
    assert res is out and out.data_ptr() == ptr
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_out_resizes_empty_out_without_warning():
    import warnings
    a = torch.randn(3, 5)
    out = torch.empty(0, device="musa")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.mul(a.musa(), 2, out=out)
    assert out.shape == (3, 5) and out.is_musa
    torch.testing.assert_close(out.cpu(), a * 2)


def test_out_non_contiguous_out_tensor():
    a = torch.randn(4, 6)
    big_c = torch.zeros(6, 4)
    big_m = big_c.musa()
    torch.add(a, 1, out=big_c.t())
    torch.add(a.musa(), 1, out=big_m.t())
    torch.testing.assert_close(big_m.cpu(), big_c)


def test_out_dtype_mismatch_raises_like_cpu():
    a = torch.randn(3)
    with pytest.raises(RuntimeError):
        torch.add(a, a, out=torch.empty(3, dtype=torch.long))
    with pytest.raises(RuntimeError):
        torch.add(a.musa(), a.musa(), out=torch.empty(3, dtype=torch.long, device="musa"))


def test_out_on_cpu_with_musa_inputs_raises():
    a = torch.randn(3, device="musa")
    with pytest.raises(RuntimeError):
        torch.add(a, a, out=torch.empty(3))


_W = torch.randn(2, 4, 2, generator=torch.Generator().manual_seed(4))

NONCONTIG_OPS = {
    "matmul": lambda t: t @ t.t(),
    "softmax": lambda t: torch.softmax(t, 1),
    "sum": lambda t: t.sum(0),
    "sort": lambda t: t.sort(1).values,
    "abs_add": lambda t: t.abs() + t,
    "conv": lambda t: torch.nn.functional.conv1d(t.unsqueeze(0), _W.to(t.device)),
    "index_select": lambda t: t.index_select(1, torch.tensor([0, 2], device=t.device)),
    "cat": lambda t: torch.cat([t, t * 2], 1),
}


@pytest.mark.parametrize("name", sorted(NONCONTIG_OPS))
def test_non_contiguous_inputs_match_cpu(name):
    f = NONCONTIG_OPS[name]
    c, m = _both((6, 8))
    vc, vm = c.t()[::2], m.t()[::2]
    assert not vm.is_contiguous()
    torch.testing.assert_close(f(vm).cpu(), f(vc), rtol=1e-5, atol=1e-5)


def test_channels_last_memory_format():
    x = torch.randn(2, 3, 4, 5)
    m = x.musa().to(memory_format=torch.channels_last)
    assert m.is_contiguous(memory_format=torch.channels_last)
    assert m.stride() == x.to(memory_format=torch.channels_last).stride()
    conv = torch.nn.Conv2d(3, 2, 3)
    ref = conv(x)
    out = conv.musa()(m)
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_resize_():
    c = torch.arange(6.0)
    m = c.musa()
    for t in (c, m):
        t.resize_(2, 3)
    assert m.shape == (2, 3)
    torch.testing.assert_close(m.cpu(), c)
    # growing reallocates storage and keeps the old prefix
    for t in (c, m):
        t.resize_(4, 5)
    assert m.shape == (4, 5) and m.untyped_storage().nbytes() >= 20 * 4
    torch.testing.assert_close(m.cpu().flatten()[:6], c.flatten()[:6])
    for t in (c, m):
        t.resize_(0)
    assert m.numel() == 0


def test_resize_as_and_set_():
    m = torch.arange(4.0, device="musa")
    m.resize_as_(torch.empty(2, 2))
    assert m.shape == (2, 2)
    src = torch.arange(10.0, device="musa")
    t = torch.empty(0, device="musa")
    t.set_(src.untyped_storage(), 2, (2, 3), (3, 1))
    assert t.untyped_storage().data_ptr() == src.untyped_storage().data_ptr()
    torch.testing.assert_close(t.cpu(), torch.arange(10.0).as_strided((2, 3), (3, 1), 2))


def test_storage_resize_bytes():
    m = torch.zeros(4, device="musa")
    s = m.untyped_storage()
    s.resize_(64)
    assert s.nbytes() == 64
    assert torch.equal(m.cpu(), torch.zeros(4))


def test_clone_and_detach_semantics():
    c, m = _both()
    cl = m.clone()
    assert cl.data_ptr() != m.data_ptr()
    d = m.detach()
    assert d.data_ptr() == m.data_ptr()
    d.fill_(1)
    assert torch.equal(m.cpu(), torch.ones(4, 6))


@pytest.mark.parametrize("fn", [torch.max, torch.min])
@pytest.mark.parametrize("out_shape, out_dtype", [((), torch.float32), ((0,), torch.float32), ((3,), torch.float32),
                                                  ((), torch.float64)])
def test_full_reduction_with_out_as_cpu(fn, out_shape, out_dtype):
    # max(input, out=...) / min(input, out=...) with no dim: a 0-dim result written into out
    x = torch.randn(4, 5)
    ref_out = torch.empty(out_shape, dtype=out_dtype)
    out = ref_out.to("musa")
    if out_dtype != x.dtype and torch.musa.get_driver_name() == "cuda":
        # the kernel device decides a dtype-changing out=, as for every delegated op: CUDA refuses it
        with pytest.raises(RuntimeError, match="provided dtype must match dtype of result"):
            fn(x.to("musa"), out=out)
        return
    with pytest.warns(UserWarning) if out_shape == (3,) else _no_warning():
        ret = fn(x.to("musa"), out=out)
    fn(x, out=ref_out)
    assert ret is out and out.shape == ref_out.shape == () and out.dtype == out_dtype
    assert torch.equal(out.cpu(), ref_out)


@pytest.mark.parametrize("fn", [torch.max, torch.min])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.uint8, torch.bool])
def test_full_reduction_with_out_over_no_elements_gives_the_identity_as_cpu(fn, dtype):
    # (torch_musa's test: the CPU's -inf/+inf or the dtype's bounds; CUDA's kernel asserts internally)
    x = torch.randn(0, 8, 7).to(dtype)
    ref = fn(x, out=torch.tensor([], dtype=dtype))
    got = fn(x.to("musa"), out=torch.tensor([], dtype=dtype, device="musa"))
    assert got.device.type == "musa" and got.dtype == dtype and got.shape == ()
    assert torch.equal(got.cpu(), ref)


def _no_warning():
    import contextlib
    import warnings

    @contextlib.contextmanager
    def cm():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            yield
    return cm()


@pytest.mark.parametrize("direction", ["musa->musa", "cpu->musa", "musa->cpu"])
def test_copy_converts_broadcasts_and_records_one_op_as_cpu(direction):
    from torch.profiler import ProfilerActivity, profile

    src_cpu = torch.randn(1, 6, generator=torch.Generator().manual_seed(1))
    dst_cpu = torch.zeros(4, 6, dtype=torch.float16).t().contiguous().t()  # non-contiguous destination
    ref = dst_cpu.clone().copy_(src_cpu)
    src = src_cpu if direction.startswith("cpu") else src_cpu.musa()
    dst = dst_cpu.clone() if direction.endswith("cpu") else dst_cpu.musa()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = dst.copy_(src, non_blocking=True)
    torch.musa.synchronize()
    assert out is dst
    assert torch.equal(dst.cpu(), ref) and dst.stride() == dst_cpu.stride()
    # musa's copy_ goes straight to the copy: no second trip through _copy_from, as for cuda tensors
    # (on the cuda driver a CPU-only profile also shows the CUDA copy inside it)
    names = [e.name for e in prof.events()]
    top = [e.name for e in prof.events() if e.cpu_parent is None]
    assert top == ["aten::copy_"] and "aten::_copy_from" not in names, names


def test_copy_errors_and_zero_tensors_as_cpu():
    for device in ("cpu", "musa"):
        a = torch.ones(3, device=device)
        with pytest.raises(RuntimeError, match="size of tensor a \\(2\\) must match"):
            torch.ones(2, device=device).copy_(a)
        with pytest.raises(RuntimeError, match="size of tensor a \\(0\\) must match"):
            torch.empty(0, device=device).copy_(a)
        assert torch.empty(0, 3, device=device).copy_(a).shape == (0, 3)
        assert a.copy_(a) is a and torch.equal(a.cpu(), torch.ones(3))
        r = torch.arange(6.0, device=device)
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            r[1:].copy_(r[:-1])  # partial overlap: refused, not a silently wrong result
        r[:3].copy_(r[3:])
        assert r.tolist() == [3.0, 4.0, 5.0, 3.0, 4.0, 5.0]
    # autograd's efficient zero tensors: no memory, reads as zeros, refuses writes, as on the cpu
    z, zc = torch._efficientzerotensor(3, device="musa"), torch._efficientzerotensor(3)
    assert z._is_zerotensor() and z.device.type == "musa"
    assert torch.equal(a.copy_(z).cpu(), torch.zeros(3)) and torch.equal((z + 2).cpu(), zc + 2)
    with pytest.raises(RuntimeError, match="ZeroTensors are immutable"):
        z.add_(1)
    # views and ops the ZeroTensor key passes on read zeros, not memory that does not exist
    z2 = torch._efficientzerotensor(3, 4, device="musa")
    assert torch.equal((z2.unfold(0, 2, 1) + 0).cpu(), torch.zeros(2, 4, 2))
    assert z.dot(a).item() == 0.0 and a.vdot(z).item() == 0.0



def _as_tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


# out= overloads ATen gives one composite kernel for every device (tests/ops/out_variant_sweep.py finds
# the failing ones): mode.values checks the device type itself ("mode only supports CPU, CUDA and XPU").
COMPOSITE_OUT_FNS = {
    "mode": lambda x, out: torch.mode(x, -1, False, out=out),
    "sort": lambda x, out: torch.sort(x, 1, out=out),
    "vdot": lambda x, out: torch.vdot(x[2], x[3], out=out),
    "xlogy": lambda x, out: torch.xlogy(2.0, x.abs(), out=out),
    "dot": lambda x, out: torch.dot(x[0], x[1], out=out),
}


@pytest.mark.parametrize("name", sorted(COMPOSITE_OUT_FNS))
def test_composite_out_overloads_write_given_tensors_as_cpu(name):
    f = COMPOSITE_OUT_FNS[name]
    xc = torch.randint(-3, 4, (4, 6), generator=torch.Generator().manual_seed(0)).float()  # ties for mode
    dtypes = [t.dtype for t in _as_tuple(f(xc, None))]
    one = len(dtypes) == 1
    # The reference runs where musa's kernels run: CUDA breaks mode's and sort's ties its own way.
    ref_device = "cuda" if torch.musa.get_driver_name() == "cuda" else "cpu"
    ref_outs = tuple(torch.empty(0, dtype=d, device=ref_device) for d in dtypes)
    outs = tuple(torch.empty(0, dtype=d, device="musa") for d in dtypes)
    f(xc.to(ref_device), ref_outs[0] if one else ref_outs)
    got = f(xc.musa(), outs[0] if one else outs)
    for g, o, r in zip(_as_tuple(got), outs, ref_outs):
        assert g is o and o.device.type == "musa"
        torch.testing.assert_close(o.cpu(), r.cpu(), rtol=0, atol=1e-6)


@pytest.mark.parametrize("values_dtype, indices_dtype", [(torch.int32, torch.long), (torch.float32, torch.int32)])
def test_mode_out_of_a_wrong_dtype_raises_the_cpus_error(values_dtype, indices_dtype):
    x = torch.randn(3, 5)

    def error(device):
        outs = (torch.empty(0, dtype=values_dtype, device=device), torch.empty(0, dtype=indices_dtype, device=device))
        with pytest.raises(RuntimeError) as e:
            torch.mode(x.to(device), -1, False, out=outs)
        return str(e.value)

    assert error("musa") == error("cpu")


# A 0-dim cpu tensor may be an input beside musa tensors (as CUDA allows), never an output: CUDA's
# TensorIterator refuses a cpu output, and so does every route of the op layer.
CPU_SCALAR_OUTPUTS = {
    "nonzero out= (boxed)": lambda m, c: torch.nonzero(m, out=c.long()),
    "add out= (boxed)": lambda m, c: torch.add(m, m, out=c),
    "mode out= (composite out)": lambda m, c: torch.mode(m, 0, out=(c, c.long())),
    "add_ on cpu self (unboxed in place)": lambda m, c: c.add_(m[0]),
    "addcmul_ on cpu self (unboxed in place)": lambda m, c: c.addcmul_(m[0], m[1]),
    "clamp_ on cpu self (boxed in place)": lambda m, c: c.clamp_(m[0], m[1]),
}


@pytest.mark.parametrize("name", sorted(CPU_SCALAR_OUTPUTS))
def test_cpu_0dim_tensor_is_never_an_output_of_musa_ops(name):
    m = torch.randn(3, device="musa")
    c = torch.tensor(7.0)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        CPU_SCALAR_OUTPUTS[name](m, c)
    assert c.item() == 7.0


def test_cpu_0dim_tensor_is_still_an_input_scalar():
    x = torch.randn(3)
    s = torch.tensor(2.5)
    torch.testing.assert_close((x.musa() + s).cpu(), x + s)
    m = x.musa()
    m.mul_(s)
    torch.testing.assert_close(m.cpu(), x * s)
