"""torch.nn.SwishGLU / F.swish_glu / torch.gated_silu on musa: forward and gradients against
silu(a) * b in float64, all three dtypes; errors."""
import pytest
import torch
import torch.nn.functional as F

from tests.nn import fused_reference as ref


@pytest.mark.parametrize("dtype", ref.DTYPES)
# (3, 64): halves in 16-byte packs for every dtype (the cuda driver's kernels); 24: for float32 only
# (2, 4160): several blocks, with rows ending inside a block
@pytest.mark.parametrize("shape", [(7, 24), (2, 5, 34), (3, 64), (2, 4160)])
def test_swish_glu_matches_the_composition(dtype, shape):
    torch.manual_seed(0)
    ref.check_fwd_bwd(F.swish_glu, ref.swish_glu, [torch.randn(shape) * 2], dtype)


def test_module_gated_silu_and_empty(device):
    x = torch.randn(4, 3, 10)
    out = torch.nn.SwishGLU()(x.to(device))
    torch.testing.assert_close(out.cpu().double(), ref.swish_glu(x.double()), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(torch.gated_silu(x.to(device)), out)
    torch.testing.assert_close(torch.swish_glu(x.to(device)), out)
    assert F.swish_glu(torch.randn(1, 0, 12, device=device)).shape == (1, 0, 6)
    # a transposed input: the output is contiguous, as the fake kernel (torch.compile's) says
    xt = torch.randn(10, 4, device=device).t()
    out = torch.ops.musa_fused._fused_swiglu_forward(xt)
    assert out.is_contiguous()
    torch.testing.assert_close(out.cpu().double(), ref.swish_glu(xt.cpu().double()), atol=1e-6, rtol=1e-5)


def test_bad_inputs_name_the_problem(device):
    with pytest.raises(ValueError, match="last dimension must be even"):
        F.swish_glu(torch.randn(3, 5, device=device))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        torch.gated_silu(torch.randn(6, device=device))
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        F.swish_glu(torch.randn(3, 4, device=device, dtype=torch.float64))
