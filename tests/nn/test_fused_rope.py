"""torch.nn.RoPE / F.rope (torch_musa's fused rotary embedding) on musa: forward and gradients
against Megatron's composition in float64, every layout flag, all three dtypes; errors."""
import pytest
import torch
import torch.nn.functional as F

from tests.nn import fused_reference as ref

S, B, H, D = 6, 2, 3, 16


@pytest.mark.parametrize("dtype", ref.DTYPES)
@pytest.mark.parametrize("interleaved,batch_first,mla,rot", [
    (False, False, False, D), (True, False, False, D), (False, True, False, D), (False, False, True, D),
    (True, True, True, 8), (False, False, False, 8)])
def test_rope_matches_the_composition(dtype, interleaved, batch_first, mla, rot):
    torch.manual_seed(0)
    x = torch.randn((B, S, H, D) if batch_first else (S, B, H, D))
    freq = torch.randn(S, rot) * 3  # arbitrary angles: each feature's own angle is exercised
    ref.check_fwd_bwd(lambda a, f: F.rope(a, f, interleaved, batch_first, mla),
                      lambda a, f: ref.rope(a, f, interleaved, batch_first, mla), [x, freq], dtype, grad_of=[0])


@pytest.mark.parametrize("interleaved,mla", [(False, False), (True, True)])
def test_rope_wide_heads(interleaved, mla):
    # a head wider than one block of the cuda driver's kernel (each thread takes several features)
    torch.manual_seed(0)
    x, freq = torch.randn(S, B, H, 320), torch.randn(S, 256) * 3
    ref.check_fwd_bwd(lambda a, f: F.rope(a, f, interleaved, False, mla),
                      lambda a, f: ref.rope(a, f, interleaved, False, mla), [x, freq], torch.float32, grad_of=[0])


def test_module_and_torch_names(device):
    torch.manual_seed(1)
    x, freq = torch.randn(S, B, H, D), torch.randn(S, 1, 1, D)
    m = torch.nn.RoPE(freq, rotary_interleaved=True).to(device)
    assert m.freq_cis.device.type == "musa" and "rotary_interleaved=True" in repr(m)
    out = m(x.to(device))
    torch.testing.assert_close(out.cpu().double(), ref.rope(x.double(), freq, interleaved=True), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.rope(x.to(device), freq.to(device), True, False), out)
    # a strided view (q out of a merged qkv) gives the same as its contiguous copy
    qkv = torch.randn(S, B, H, 3 * D, device=device)
    q = qkv[..., :D]
    torch.testing.assert_close(F.rope(q, freq.to(device)), F.rope(q.contiguous(), freq.to(device)))


def test_bad_inputs_name_the_problem(device):
    x = torch.randn(S, B, H, D, device=device)
    with pytest.raises(ValueError, match="freq_cis has 5 positions"):
        F.rope(x, torch.randn(5, D, device=device))
    with pytest.raises(ValueError, match="must be even and at most the head dimension"):
        F.rope(x, torch.randn(S, D + 2, device=device))
    with pytest.raises(ValueError, match="must be 4-D"):
        F.rope(x[0], torch.randn(S, D, device=device))
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        F.rope(x.double(), torch.randn(S, D, device=device))
