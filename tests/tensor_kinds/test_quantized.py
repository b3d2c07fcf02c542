"""Quantized musa tensors against the same program on the cpu."""
import io

import pytest
import torch

from tests.conftest import assert_same

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _x(shape=(6, 4), seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _same_q(m, ref):
    assert m.is_quantized and m.device.type == "musa"
    assert m.qscheme() == ref.qscheme() and m.dtype == ref.dtype
    assert_same(m.int_repr(), ref.int_repr())


@pytest.mark.parametrize("dtype", [torch.qint8, torch.quint8, torch.qint32])
def test_quantize_per_tensor(dtype):
    x = _x()
    q, ref = torch.quantize_per_tensor(x.musa(), 0.05, 3, dtype), torch.quantize_per_tensor(x, 0.05, 3, dtype)
    _same_q(q, ref)
    assert (q.q_scale(), q.q_zero_point()) == (ref.q_scale(), ref.q_zero_point())
    assert_same(q.dequantize(), ref.dequantize())
    _same_q(q[1:3].t(), ref[1:3].t())  # views
    _same_q(q.clone(), ref)
    assert q.cpu().device.type == "cpu" and torch.equal(q.cpu().int_repr(), ref.int_repr())
    _same_q(ref.to("musa"), ref)


def test_quantize_per_channel_and_dynamic():
    x, scales, zps = _x(), torch.rand(6) + 0.05, torch.arange(6)
    q = torch.quantize_per_channel(x.musa(), scales.musa(), zps.musa(), 0, torch.qint8)
    ref = torch.quantize_per_channel(x, scales, zps, 0, torch.qint8)
    _same_q(q, ref)
    assert q.q_per_channel_scales().device.type == "musa" and q.q_per_channel_axis() == 0
    assert_same(q.q_per_channel_zero_points(), ref.q_per_channel_zero_points())
    assert_same(q.dequantize(), ref.dequantize())
    back = q.cpu()  # per-channel parameters follow the tensor to the cpu
    assert back.q_per_channel_scales().device.type == "cpu" and torch.equal(back.dequantize(), ref.dequantize())
    _same_q(torch.quantize_per_tensor_dynamic(x.musa(), torch.quint8, False),
            torch.quantize_per_tensor_dynamic(x, torch.quint8, False))


def test_quantized_ops_and_modules_match_cpu():
    import torch.ao.nn.quantized as nnq

    x = _x((2, 4))
    q, ref = torch.quantize_per_tensor(x.musa(), 0.05, 64, torch.quint8), torch.quantize_per_tensor(x, 0.05, 64, torch.quint8)
    _same_q(torch.relu(q), torch.relu(ref))
    _same_q(torch.ops.quantized.add(q, q, 0.1, 0), torch.ops.quantized.add(ref, ref, 0.1, 0))
    torch.manual_seed(0)
    lin = nnq.Linear(4, 3)
    _same_q(lin(q), lin(ref))
    conv = nnq.Conv2d(2, 3, 3)
    img = torch.quantize_per_tensor(_x((1, 2, 5, 5)), 0.05, 64, torch.quint8)
    _same_q(conv(img.musa()), conv(img))
    _same_q(nnq.ReLU6()(q), nnq.ReLU6()(ref))


def test_fake_quantization_and_qat_module():
    x = _x()
    assert_same(torch.fake_quantize_per_tensor_affine(x.musa(), 0.1, 0, -128, 127),
                torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127))
    torch.manual_seed(0)
    fq_ref, fq = torch.ao.quantization.FakeQuantize(), torch.ao.quantization.FakeQuantize().musa()
    a, b = x.clone().requires_grad_(), x.musa().requires_grad_()
    fq_ref(a).pow(2).sum().backward()
    fq(b).pow(2).sum().backward()
    assert_same(b.grad, a.grad)
    assert_same(fq.scale, fq_ref.scale)


def test_save_load_and_memory():
    before = torch.musa.memory_allocated()
    q = torch.quantize_per_tensor(_x((64, 64)).musa(), 0.05, 3, torch.qint8)
    assert torch.musa.memory_allocated() >= before + 64 * 64  # the int8 data is musa memory
    buf = io.BytesIO()
    torch.save(q, buf)
    buf.seek(0)
    r = torch.load(buf)
    assert r.device.type == "musa" and torch.equal(r.int_repr().cpu(), q.int_repr().cpu())


def test_mixed_quantized_copy_is_a_clear_error():
    q = torch.quantize_per_tensor(_x().musa(), 0.05, 3, torch.qint8)
    with pytest.raises(RuntimeError, match="dequantize"):
        torch.empty(6, 4, device="musa").copy_(q)


def test_sub_byte_quantized_copies_move_the_packed_bytes_only(run_py):
    # quint4x2 / quint2x4 pack 2 / 4 elements a byte: a copy between devices moves the storage's
    # packed bytes, not one byte per element (which wrote past the tensor into its neighbour's
    # memory and corrupted the heap). A fresh process: the old failure killed it.
    r = run_py("""
    import torch
    n = 1024  # quint4x2: 512 packed bytes, a whole small block of the caching allocator
    for dt, per_byte in ((torch.quint4x2, 2), (torch.quint2x4, 4)):
        for m in (7, n):  # an odd count ends in a half-filled byte
            q = torch.quantize_per_tensor(torch.linspace(-1, 1, m), 0.1, 2, dt)
            torch.musa.empty_cache()  # the next two blocks are neighbours in a fresh segment
            dst = torch._empty_affine_quantized([m], scale=0.1, zero_point=2, dtype=dt, device="musa")
            after = torch.full((128,), 7.0, device="musa")
            dst.copy_(q)
            assert dst.untyped_storage().nbytes() == q.untyped_storage().nbytes() == (m + per_byte - 1) // per_byte
            assert bool((after == 7).all()), (dt, m, "the copy wrote into the next tensor")
            assert torch.equal(dst.int_repr().cpu(), q.int_repr()), (dt, m)
            back = dst.cpu()
            assert torch.equal(back.int_repr(), q.int_repr()) and torch.equal(back.dequantize(), q.dequantize())
    print("DONE")
    """, env={"TORCH_MUSA_DRIVER": torch.musa.get_driver_name()})
    assert r.returncode == 0 and "DONE" in r.stdout, r.stdout + r.stderr
