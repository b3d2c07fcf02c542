"""torch._scaled_mm on musa against a float64 reference, the calls musa takes beyond cuBLASLt's
(as torch_musa does), and CUDA's other rules with CUDA's errors."""
import pytest
import torch

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def operands(device, m=48, k=64, n=32, a_dtype=E4M3, b_dtype=E4M3, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 4).to(a_dtype)
    b = (torch.randn(n, k, generator=g) * 4).to(b_dtype)  # (n, k) row-major: b.t() is column-major
    return a, b, a.to(device), b.to(device).t()


def reference(a, b_nk, sa, sb, bias, out_dtype, scale_result=None):
    out = (a.double() * sa.double()) @ (b_nk.double().t() * sb.double())
    if bias is not None:
        out = out + bias.double()
    if scale_result is not None and out_dtype.is_floating_point and out_dtype.itemsize == 1:
        out = (out / scale_result.double()).clamp(-torch.finfo(out_dtype).max, torch.finfo(out_dtype).max)
    return out.to(out_dtype).double()


def _cpu_takes_rowwise():
    """Whether this torch's CPU _scaled_mm takes row-wise scales (2.13 does; 2.11's oneDNN path asserts
    per-tensor scales)."""
    a = torch.ones(16, 16).to(E4M3)
    try:
        torch._scaled_mm(a, a.t(), torch.ones(16, 1), torch.ones(1, 16), out_dtype=torch.bfloat16)
        return True
    except RuntimeError:
        return False


def rel_err(got, ref):
    return ((got.double().cpu() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("fast_accum", [False, True])
def test_scaled_mm_matches_float64(device, scaling, out_dtype, with_bias, fast_accum):
    if with_bias and out_dtype == torch.float32:
        pytest.skip("float32 output takes a bf16 bias only")
    a, b, ma, mb = operands(device)
    m, n = a.shape[0], b.shape[0]
    if scaling == "tensorwise":
        sa, sb = torch.tensor(0.25), torch.tensor(0.5)
    else:
        sa, sb = torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
    bias_dtype = torch.half if out_dtype == torch.float16 else torch.bfloat16
    bias = torch.randn(n).to(bias_dtype) if with_bias else None
    got = torch._scaled_mm(ma, mb, sa.to(device), sb.to(device), bias=None if bias is None else bias.to(device),
                           out_dtype=out_dtype, use_fast_accum=fast_accum)
    assert got.dtype == out_dtype and got.shape == (m, n) and got.device.type == "musa"
    assert rel_err(got, reference(a, b, sa, sb, bias, out_dtype)) <= 2e-2


def test_scaled_mm_out_and_e5m2_operand(device):
    a, b, ma, mb = operands(device, b_dtype=E5M2)
    one = torch.tensor(1.0, device=device)
    out = torch.empty(a.shape[0], b.shape[0], dtype=torch.bfloat16, device=device)
    r = torch._scaled_mm(ma, mb, one, one, out_dtype=torch.bfloat16, out=out)
    assert r.data_ptr() == out.data_ptr()
    assert rel_err(out, reference(a, b, one.cpu(), one.cpu(), None, torch.bfloat16)) <= 2e-2


@pytest.mark.parametrize("case", ["e5m2_x_e5m2", "self_column_major", "mat2_row_major",
                                  "rowwise_float16", "rowwise_float8_scale_result"])
def test_scaled_mm_beyond_cublaslt(device, case):
    """Calls cuBLASLt refuses and torch_musa takes (its test_mm.py::test_scaled_mm): musa computes
    them on both drivers, cuBLASLt's float8 GEMM where it can."""
    e5m2 = case == "e5m2_x_e5m2"
    a, b, ma, mb = operands(device, a_dtype=E5M2 if e5m2 else E4M3, b_dtype=E5M2 if e5m2 else E4M3, seed=1)
    m, n = a.shape[0], b.shape[0]
    if case == "self_column_major":
        ma = ma.t().contiguous().t()
    if case == "mat2_row_major":
        mb = mb.contiguous()
    sa, sb, out_dtype, sr = torch.tensor(0.25), torch.tensor(0.5), torch.bfloat16, None
    if case.startswith("rowwise"):
        sa, sb = torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
        out_dtype = torch.float16 if case == "rowwise_float16" else E4M3
    if case == "rowwise_float8_scale_result":
        sr = torch.rand(m, 1) * 20 + 10  # a per-row output scale, as torch_musa takes
    bias = torch.randn(n).to(torch.half if out_dtype == torch.float16 else torch.bfloat16)
    got = torch._scaled_mm(ma, mb, sa.to(device), sb.to(device), bias=bias.to(device),
                           scale_result=None if sr is None else sr.to(device), out_dtype=out_dtype)
    assert got.dtype == out_dtype and got.shape == (m, n) and got.device.type == "musa"
    ref = reference(a, b, sa, sb, bias, out_dtype, sr)
    assert rel_err(got, ref) <= (6e-2 if out_dtype == E4M3 else 2e-2)
    if sr is None and (sa.numel() == 1 or _cpu_takes_rowwise()):  # musa's result is the CPU kernel's
        cpu = torch._scaled_mm(a, b.t(), sa, sb, bias=bias, out_dtype=out_dtype)
        torch.testing.assert_close(got.cpu().double(), cpu.double(), rtol=1e-2, atol=1e-2)
    out = torch.empty(m, n, dtype=out_dtype, device=device)
    r = torch._scaled_mm(ma, mb, sa.to(device), sb.to(device), bias=bias.to(device),
                         scale_result=None if sr is None else sr.to(device), out_dtype=out_dtype, out=out)
    assert r.data_ptr() == out.data_ptr() and torch.equal(out.cpu().double(), got.cpu().double())


def test_scaled_mm_rules_and_errors(device):
    """On the host driver: CUDA's rules (torch's meta function's, with torch's wording). On the
    cuda driver: whatever native torch.cuda does with the same call, musa does too."""
    def cases(dev):
        a, b, ma, mb = operands(dev)
        one = torch.tensor(1.0, device=dev)
        return [
            (lambda: torch._scaled_mm(ma, ma, one, one), "shapes cannot be multiplied"),
            (lambda: torch._scaled_mm(ma[:, :40].contiguous(), mb[:40], one, one), "divisible by 16"),
            (lambda: torch._scaled_mm(ma.float(), mb, one, one), "fp8|float8"),
            (lambda: torch._scaled_mm(ma, mb, one.double(), one), r"float \(fp32\)|scales should be float"),
            (lambda: torch._scaled_mm(ma, mb, torch.ones(3, 1, device=dev), torch.ones(1, 32, device=dev),
                                      out_dtype=torch.bfloat16), "Invalid scaling configuration"),
            (lambda: torch._scaled_mm(ma, mb, one, one, scale_result=torch.ones(5, device=dev), out_dtype=E4M3),
             "scale_result"),
            (lambda: torch._scaled_mm(ma, mb, one, one, bias=torch.ones(7, device=dev, dtype=torch.bfloat16),
                                      out_dtype=torch.bfloat16), "Bias must be size"),
            (lambda: torch._scaled_mm(ma, mb, one, one, bias=torch.ones(32, device=dev),
                                      out_dtype=torch.bfloat16), "Bias must be"),
        ]

    if torch.musa.get_driver_name() == "cuda":
        for (musa_call, _), (cuda_call, _) in zip(cases(device), cases("cuda")):
            try:
                cuda_call()
            except (RuntimeError, ValueError) as e:
                with pytest.raises(type(e)):  # the same error class
                    musa_call()
            else:
                musa_call()  # native CUDA accepts it: so must musa
    else:
        for fn, pattern in cases(device):
            with pytest.raises((RuntimeError, ValueError), match=pattern):
                fn()
    # the process stays usable
    _, _, ma, mb = operands(device)
    one = torch.tensor(1.0, device=device)
    assert torch._scaled_mm(ma, mb, one, one, out_dtype=torch.bfloat16).shape == (48, 32)
