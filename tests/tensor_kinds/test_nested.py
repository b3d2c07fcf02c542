"""Nested musa tensors (strided and jagged layouts) and the transformer fast paths, against the cpu."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.conftest import assert_same

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _parts(seed=0, d=4):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2, d, generator=g), torch.randn(3, d, generator=g)]


def test_strided_nested_ops_match_cpu():
    parts = _parts()
    ref = torch.nested.nested_tensor(parts)
    nt = torch.nested.nested_tensor(parts, device="musa")
    assert nt.is_nested and nt.device.type == "musa"
    assert_same(torch.nested.to_padded_tensor(nt, 0.0), torch.nested.to_padded_tensor(ref, 0.0))
    torch.manual_seed(0)
    lin, norm = nn.Linear(4, 6), nn.LayerNorm(4)
    cases = [lambda t, m: (t * 2 + 1).sin(), lambda t, m: m[0](t), lambda t, m: F.softmax(t, -1),
             lambda t, m: m[1](t), lambda t, m: torch.matmul(t, t.transpose(-1, -2))]
    mods = (lin, norm)
    mods_musa = (nn.Linear(4, 6).musa(), nn.LayerNorm(4).musa())
    for a, b in zip(mods_musa, mods):
        a.load_state_dict(b.state_dict())
    for case in cases:
        assert_same(case(nt, mods_musa).to_padded_tensor(0.0), case(ref, mods).to_padded_tensor(0.0))
    assert nt.cpu().device.type == "cpu" and nt.cpu().is_nested
    assert [t.device.type for t in nt.unbind()] == ["musa", "musa"]


def test_nested_autograd():
    parts = _parts()
    ref_leaves = [p.clone().requires_grad_() for p in parts]
    leaves = [p.musa().requires_grad_() for p in parts]
    torch.manual_seed(0)
    lin_ref = nn.Linear(4, 2)
    lin = nn.Linear(4, 2).musa()
    lin.load_state_dict(lin_ref.state_dict())
    for ls, l, in ((ref_leaves, lin_ref), (leaves, lin)):
        torch.nested.to_padded_tensor(l(torch.nested.as_nested_tensor(ls)), 0.0).pow(2).sum().backward()
    for a, b in zip(leaves, ref_leaves):
        assert_same(a.grad, b.grad)
    assert_same(lin.weight.grad, lin_ref.weight.grad)


def test_jagged_layout_and_sdpa():
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(3, 2, 8, generator=g), torch.randn(5, 2, 8, generator=g)]
    ref = torch.nested.nested_tensor(parts, layout=torch.jagged).transpose(1, 2)
    nj = torch.nested.nested_tensor(parts, layout=torch.jagged, device="musa").transpose(1, 2)
    out = F.scaled_dot_product_attention(nj, nj, nj)
    assert out.is_nested and out.values().device.type == "musa"
    assert_same(out.values(), F.scaled_dot_product_attention(ref, ref, ref).values())
    x = torch.randn(3, 5)
    starts, lengths = torch.tensor([0, 1, 2]), torch.tensor([2, 3, 1])
    n = torch.nested.narrow(x.musa(), 1, starts.musa(), lengths.musa(), layout=torch.jagged)
    n_ref = torch.nested.narrow(x, 1, starts, lengths, layout=torch.jagged)
    for a, b in zip(n.unbind(), n_ref.unbind()):
        assert_same(a, b)


def test_transformer_encoder_fast_path_with_padding_mask():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True)
    ref = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True), 2,
                                enable_nested_tensor=True).eval().musa()
    enc.load_state_dict(ref.state_dict())
    x = torch.randn(3, 7, 32)
    mask = torch.zeros(3, 7, dtype=torch.bool)
    mask[0, 4:] = True
    mask[1, 6:] = True
    with torch.no_grad():
        expected = ref(x, src_key_padding_mask=mask)
        with torch.autograd.profiler.profile() as prof:
            got = enc(x.musa(), src_key_padding_mask=mask.musa())
        assert_same(got, expected, atol=1e-5, rtol=1e-4)
        names = {e.name for e in prof.function_events}
        # The fast path ran on musa: the padded batch became a nested tensor.
        assert {"aten::_nested_tensor_from_mask", "aten::_transformer_encoder_layer_fwd"} <= names, names
        mha_ref = nn.MultiheadAttention(32, 4, batch_first=True).eval()
        mha = nn.MultiheadAttention(32, 4, batch_first=True).eval().musa()
        mha.load_state_dict(mha_ref.state_dict())
        with torch.autograd.profiler.profile() as prof:
            xm = x.musa()  # (self-attention: the fast path wants one tensor as query, key and value)
            out, _ = mha(xm, xm, xm, key_padding_mask=mask.musa(), need_weights=False)
        assert "aten::_native_multi_head_attention" in {e.name for e in prof.function_events}
        out_ref, _ = mha_ref(x, x, x, key_padding_mask=mask, need_weights=False)
        assert_same(out, out_ref, atol=1e-5, rtol=1e-4)
    # The fast path's nested building block itself.
    nt = torch._nested_tensor_from_mask(x.musa(), (~mask).musa())
    assert nt.is_nested and nt.device.type == "musa"
    assert_same(nt.to_padded_tensor(0.0, (3, 7, 32)), torch._nested_tensor_from_mask(x, ~mask).to_padded_tensor(0.0, (3, 7, 32)))
