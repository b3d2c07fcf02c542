"""Ops the kernel device has no kernel for in a dtype GPUs support run widened: float32 for
half/bfloat16, float64 for integers, results cast back (torch.musa.ops.widened_op_counts()).
The reference is the CPU computing in float32/float64, to half precision's tolerance."""
import pytest
import torch
import torch.nn.functional as F

HALF_TOL = dict(rtol=2e-3, atol=2e-3)


def widened(*ops):
    """The counts to expect: the host driver's CPU kernels lack these dtypes; the cuda driver's
    CUDA kernels have them, so nothing is widened there."""
    return {op: 1 for op in ops} if torch.musa.get_driver_name() == "host" else {}


@pytest.fixture(autouse=True)
def _counts():
    torch.musa.ops.reset_widened_op_counts()
    yield


def test_antialiased_bilinear_in_half(device):
    x = torch.randn(1, 2, 9, 9)
    got = F.interpolate(x.to(device).half(), size=(5, 5), mode="bilinear", antialias=True)
    ref = F.interpolate(x.half().float(), size=(5, 5), mode="bilinear", antialias=True)
    assert got.dtype == torch.half and got.device.type == "musa"
    torch.testing.assert_close(got.cpu().float(), ref, **HALF_TOL)
    assert torch.musa.ops.widened_op_counts() == widened("aten::_upsample_bilinear2d_aa")


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("dtype", [torch.half, torch.bfloat16])
def test_antialiased_upsampling_of_an_empty_batch_in_half(device, mode, dtype):
    """An empty batch takes the CPU's kernel on both drivers (ops/empty_inputs.cpp); the CPU has
    no half-precision one, so it runs widened there too, forward and backward."""
    x = torch.randn(0, 3, 4, 4)
    x_musa = x.to(device, dtype).requires_grad_()
    got = F.interpolate(x_musa, scale_factor=2, mode=mode, antialias=True)
    got.sum().backward()
    x_ref = x.requires_grad_()
    ref = F.interpolate(x_ref, scale_factor=2, mode=mode, antialias=True)
    ref.sum().backward()
    assert got.dtype == dtype and got.device.type == "musa" and got.shape == ref.shape
    assert x_musa.grad.dtype == dtype and x_musa.grad.shape == x_ref.grad.shape
    name = f"aten::_upsample_{mode}2d_aa"
    assert torch.musa.ops.widened_op_counts() == {name: 1, name + "_backward": 1}


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_histc_on_integers(device, dtype):
    x = torch.randint(0, 10, (200,)).to(dtype)
    got = torch.histc(x.to(device), bins=10, min=0, max=10)
    assert got.dtype == dtype  # as CUDA's histc: the input's dtype
    torch.testing.assert_close(got.cpu(), torch.histc(x.double(), bins=10, min=0, max=10).to(dtype))
    assert torch.musa.ops.widened_op_counts() == widened("aten::histc")


def test_out_argument_gets_the_result_in_its_own_dtype(device):
    x = torch.randint(0, 5, (50,))
    out = torch.empty(0, dtype=torch.int64, device=device)
    ret = torch.histc(x.to(device), bins=5, min=0, max=5, out=out)
    assert ret is out and out.dtype == torch.int64 and out.shape == (5,)  # resized as out= is
    torch.testing.assert_close(out.cpu(), torch.histc(x.double(), bins=5, min=0, max=5).long())


def test_ctc_loss_in_half_forward_and_backward(device):
    torch.manual_seed(0)
    lp = torch.randn(12, 2, 6).log_softmax(2)
    targets = torch.randint(1, 6, (2, 4))
    lens, tlens = torch.tensor([12, 12]), torch.tensor([4, 3])
    lp_musa = lp.half().to(device).requires_grad_()
    got = F.ctc_loss(lp_musa, targets.to(device), lens, tlens, reduction="sum")
    got.backward()
    lp_ref = lp.half().float().requires_grad_()
    ref = F.ctc_loss(lp_ref, targets, lens, tlens, reduction="sum")
    ref.backward()
    assert got.dtype == torch.half and lp_musa.grad.dtype == torch.half
    torch.testing.assert_close(got.float().cpu(), ref, rtol=2e-3, atol=1e-2)
    # The backward reads the forward's saved log-alpha, stored in half as a half kernel's would be.
    torch.testing.assert_close(lp_musa.grad.float().cpu(), lp_ref.grad, rtol=1e-2, atol=1e-2)
    counts = torch.musa.ops.widened_op_counts()
    assert counts["aten::_ctc_loss"] == 1 and counts["aten::_ctc_loss_backward"] == 1


@pytest.mark.parametrize("fn", [torch.special.bessel_j0, torch.special.log_ndtr, torch.special.airy_ai])
@pytest.mark.parametrize("dtype", [torch.half, torch.bfloat16])
def test_pointwise_fast_path_widens_too(device, fn, dtype):
    x = torch.rand(64) + 0.5
    got = fn(x.to(dtype).to(device))
    assert got.dtype == dtype
    tol = HALF_TOL if dtype == torch.half else dict(rtol=1.6e-2, atol=1e-2)
    torch.testing.assert_close(got.cpu().float(), fn(x.to(dtype).float()).to(dtype).float(), **tol)
    assert sum(torch.musa.ops.widened_op_counts().values()) == 1


def test_ops_with_a_kernel_are_not_widened(device):
    x = torch.randn(16, device=device).half()
    (x * 2).relu().sum()
    F.interpolate(torch.randn(1, 1, 4, 4, device=device).half(), scale_factor=2, mode="bilinear")
    assert torch.musa.ops.widened_op_counts() == {}


def test_float8_reductions_are_not_widened_and_the_error_names_the_dtype(device):
    x = torch.randn(8, device=device).to(torch.float8_e4m3fn)
    with pytest.raises(RuntimeError, match="Float8_e4m3fn"):
        x.cumsum(0)
    assert torch.musa.ops.widened_op_counts() == {}
    assert x.float().shape == (8,)  # the process stays usable


def test_other_errors_are_not_swallowed(device):
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        torch.mm(torch.randn(2, 3, device=device).half(), torch.randn(4, 5, device=device).half())
    assert torch.musa.ops.widened_op_counts() == {}


@pytest.mark.parametrize("fn", [torch.frac, lambda x: torch.lerp(x, x, 0.5)], ids=["frac", "lerp"])
def test_integer_ops_without_a_gpu_kernel_raise_as_on_cuda(device, fn):
    # CUDA has no int64 kernel for these either: widening would compute what torch.cuda refuses.
    x = torch.arange(4)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        fn(x)
    with pytest.raises(RuntimeError, match="not implemented for 'Long'"):
        fn(x.to(device))
    assert torch.musa.ops.widened_op_counts() == {}
    torch.testing.assert_close(fn(x.to(device).double()).cpu(), fn(x.double()))  # the process goes on
