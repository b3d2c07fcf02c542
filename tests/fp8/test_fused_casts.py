"""The fused FP8 casts (amax + scale + cast [+ transpose] in one op) equal the unfused eager
reference bit for bit, on every input dtype, shape, option and special value."""
import pytest
import torch

from torch_musa import fp8

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
IN_DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def u8(t):
    """The bits, with every NaN as one pattern: IEEE leaves a NaN result's sign and payload open
    (x86 and GPUs differ), so "bit for bit" is over the non-NaN values and the NaN positions."""
    t = t.cpu()
    return torch.where(t.float().isnan(), torch.full_like(t.view(torch.uint8), 0x7F), t.view(torch.uint8))


def same(got, ref):
    assert got.data.shape == ref.data.shape and got.data.dtype == ref.data.dtype
    assert torch.equal(u8(got.data), u8(ref.data))
    if ref.data_t is not None:
        assert torch.equal(u8(got.data_t), u8(ref.data_t))
    s, rs = got.scale.cpu(), ref.scale.cpu()
    assert s.shape == rs.shape and s.dtype == torch.float32
    assert torch.equal(s.nan_to_num(), rs.nan_to_num()) and torch.equal(s.isnan(), rs.isnan())
    i, ri = got.inv_scale.cpu(), ref.inv_scale.cpu()
    assert torch.equal(i.nan_to_num(), ri.nan_to_num()) and torch.equal(i.isnan(), ri.isnan())


def sample(shape, dtype, seed=0, spread=3.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape, generator=g) * spread)
    return x.to(dtype)


@pytest.mark.parametrize("dtype", IN_DTYPES)
@pytest.mark.parametrize("f8", [E4M3, E5M2])
@pytest.mark.parametrize("shape", [(64, 128), (37, 80), (3, 5, 48), (1, 16), (300, 17)])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("power_of_2", [False, True])
def test_tensorwise_equals_reference(device, dtype, f8, shape, transpose, power_of_2):
    x = sample(shape, dtype)
    got = fp8.to_float8_tensorwise(x.to(device), f8, transpose=transpose, power_of_2=power_of_2)
    ref = fp8.reference_tensorwise(x, f8, transpose=transpose, power_of_2=power_of_2)
    assert got.data.device.type == "musa"
    same(got, ref)
    if power_of_2:
        m, e = torch.frexp(got.scale.cpu())
        assert m.item() == 0.5  # an exact power of two


@pytest.mark.parametrize("dtype", IN_DTYPES)
@pytest.mark.parametrize("f8", [E4M3, E5M2])
@pytest.mark.parametrize("shape", [(64, 128), (37, 80), (5, 3000)])
@pytest.mark.parametrize("power_of_2", [False, True])
def test_rowwise_equals_reference(device, dtype, f8, shape, power_of_2):
    x = sample(shape, dtype, seed=1)
    got = fp8.to_float8_rowwise(x.to(device), f8, power_of_2=power_of_2)
    same(got, fp8.reference_rowwise(x, f8, power_of_2=power_of_2))


def test_given_scale_special_values_and_non_contiguous_input(device):
    x = sample((32, 48), torch.bfloat16)
    scale = torch.tensor(3.7)
    same(fp8.to_float8_tensorwise(x.to(device), E4M3, scale=scale.to(device)),
         fp8.reference_tensorwise(x, E4M3, scale=scale))
    for special in (torch.zeros(16, 16), torch.full((16, 16), float("inf")), torch.tensor([[1.0, float("nan")] * 8] * 2)):
        for dt in IN_DTYPES:
            s = special.to(dt)
            same(fp8.to_float8_tensorwise(s.to(device), E4M3, transpose=True),
                 fp8.reference_tensorwise(s, E4M3, transpose=True))
            same(fp8.to_float8_rowwise(s.to(device), E5M2), fp8.reference_rowwise(s, E5M2))
    t = sample((48, 32), torch.float32).t()  # non-contiguous
    same(fp8.to_float8_tensorwise(t.to(device), E4M3, transpose=True), fp8.reference_tensorwise(t, E4M3, transpose=True))


def test_saturation_keeps_values_in_range(device):
    x = torch.tensor([[1.0, 2.0, -1000.0] + [0.0] * 13])
    got = fp8.to_float8_tensorwise(x.to(device), E4M3, scale=torch.tensor(1.0, device=device))
    assert got.data.float().abs().max().item() == 448.0  # saturated, not NaN


def test_bad_input_errors(device):
    x = torch.randn(16, 16, device=device)
    with pytest.raises(ValueError, match="float8_e4m3fn or torch.float8_e5m2"):
        fp8.to_float8_tensorwise(x, torch.float16)
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        fp8.to_float8_tensorwise(x.double(), E4M3)
    with pytest.raises(ValueError, match="2-D"):
        fp8.to_float8_rowwise(x.reshape(2, 8, 16), E4M3)
    with pytest.raises(ValueError, match="one element"):
        fp8.to_float8_tensorwise(x, E4M3, scale=torch.ones(2, device=device))
    assert fp8.to_float8_tensorwise(x, E4M3).data.shape == (16, 16)  # still usable
