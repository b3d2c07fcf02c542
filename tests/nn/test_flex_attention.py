"""torch.nn.attention.flex_attention on musa tensors, eager and compiled, against a dense
attention reference computed on CPU (native cuda is compared in bench/flex_bench.py, in its own
process).

Eager: torch's dense implementation of the higher-order op over musa memory. Compiled: on the
host driver the CPU graph over musa memory (Inductor's C++ template for inference, torch's dense
implementation traced into the graph for training); on the cuda driver Triton templates.
Compiles are slow on CI's two cores: two small compiles in all.
"""
import math
import warnings

import pytest
import torch
from torch._inductor.utils import run_and_get_code
from torch.nn.attention.flex_attention import and_masks, create_block_mask, flex_attention

ON_GPU = torch.musa.get_driver_name() == "cuda" if torch.musa.is_available() else False
S, D = 256, 16  # two 128-blocks per row, so block masks really skip blocks

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# ----------------------------------------------------------------------------- mods and reference
def causal(b, h, q, kv):
    return q >= kv


def sliding_window(b, h, q, kv):
    return (q - kv).abs() <= 48


def documents(doc_ids):
    def same_document(b, h, q, kv):
        return doc_ids[q] == doc_ids[kv]

    return same_document


def head_bias(bias):
    def score_mod(score, b, h, q, kv):
        return score + bias[h] * (q - kv).abs().to(score.dtype) / S

    return score_mod


def doc_ids(device):
    return torch.tensor([0] * 100 + [1] * 60 + [2] * 96, device=device)


def reference(q, k, v, score_mod=None, mask_mod=None):
    """Dense attention on CPU in float64: scores, score_mod, mask, softmax, times v (GQA by repeat)."""
    q, k, v = (t.detach().cpu().double().requires_grad_(t.requires_grad) for t in (q, k, v))
    g = q.size(1) // k.size(1)
    kr, vr = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    scores = q @ kr.transpose(-2, -1) / math.sqrt(q.size(-1))
    b, h, m, n = (torch.arange(s).view([-1 if i == j else 1 for j in range(4)]) for i, s in enumerate(scores.shape))
    if score_mod is not None:
        scores = score_mod(scores, b, h, m, n)
    if mask_mod is not None:
        scores = scores.masked_fill(~mask_mod(b, h, m, n).expand(scores.shape), -math.inf)
    return torch.softmax(scores, -1) @ vr, (q, k, v)


def qkv(device, hq=2, hkv=2, dtype=torch.float32, grad=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(2, hq, S, D), (2, hkv, S, D), (2, hkv, S, D)]
    return [torch.randn(s, generator=gen, dtype=dtype).to(device).requires_grad_(grad) for s in shapes]


def check_forward_backward(run, q, k, v, score_mod_cpu, mask_mod_cpu, atol=2e-5, rtol=1e-5):
    out = run(q, k, v)
    assert out.device == q.device and out.dtype == q.dtype
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device)
    out.backward(grad_out)
    ref, leaves = reference(q, k, v, score_mod_cpu, mask_mod_cpu)
    ref.backward(grad_out.cpu().double())
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), atol=atol, rtol=rtol)
    for t, r in zip((q, k, v), leaves):
        assert t.grad.device == q.device
        torch.testing.assert_close(t.grad.cpu().double(), r.grad, atol=atol * 5, rtol=rtol * 5)
    return out


# ----------------------------------------------------------------------------- eager
CASES = {
    "dense": (None, None),
    "causal": (None, causal),
    "sliding_window": (None, and_masks(causal, sliding_window)),
    "documents": (None, "documents"),
    "score_mod": ("bias", None),
    "score_mod_and_causal": ("bias", causal),
}


def _mods(name, device):
    score, mask = CASES[name]
    bias = torch.tensor([0.5, -1.0, 2.0, 0.25], device=device)
    score = head_bias(bias) if score == "bias" else score
    mask = documents(doc_ids(device)) if mask == "documents" else mask
    return score, mask


@pytest.mark.parametrize("name", list(CASES))
def test_eager_forward_backward(device, name):
    score_mod, mask_mod = _mods(name, device)
    score_cpu, mask_cpu = _mods(name, "cpu")
    block_mask = create_block_mask(mask_mod, None, None, S, S, device=device) if mask_mod else None
    q, k, v = qkv(device)
    check_forward_backward(lambda q, k, v: flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask),
                           q, k, v, score_cpu, mask_cpu)


def test_eager_gqa(device):
    block_mask = create_block_mask(causal, None, None, S, S, device=device)
    q, k, v = qkv(device, hq=4, hkv=2)
    check_forward_backward(lambda q, k, v: flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True),
                           q, k, v, None, causal)


def test_block_mask_on_musa_equals_cpu(device):
    mask = and_masks(causal, documents(doc_ids(device)))
    on_musa = create_block_mask(mask, 2, 1, S, S, device=device)
    on_cpu = create_block_mask(and_masks(causal, documents(doc_ids("cpu"))), 2, 1, S, S, device="cpu")
    assert on_musa.kv_num_blocks.device == device
    for a, b in zip(on_musa.as_tuple(), on_cpu.as_tuple()):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a.cpu(), b)


def test_autocast(device):
    q, k, v = qkv(device, grad=False)
    with torch.autocast("musa", dtype=torch.bfloat16):
        out = flex_attention(q, k, v, block_mask=create_block_mask(causal, None, None, S, S, device=device))
    assert out.dtype == torch.bfloat16 and out.device == device
    ref, _ = reference(*(t.bfloat16() for t in (q, k, v)), mask_mod=causal)
    torch.testing.assert_close(out.cpu().double(), ref, atol=2e-2, rtol=2e-2)


# ----------------------------------------------------------------------------- compiled
def test_compiled_training(device):
    """One compile: GQA, score_mod with a captured tensor, documents & sliding window & causal mask,
    forward and backward (host driver: torch's dense implementation inside the CPU graph)."""
    mask_mod = and_masks(causal, sliding_window, documents(doc_ids(device)))
    mask_cpu = and_masks(causal, sliding_window, documents(doc_ids("cpu")))
    score_mod, score_cpu = _mods("score_mod", device)[0], _mods("score_mod", "cpu")[0]
    block_mask = create_block_mask(mask_mod, None, None, S, S, device=device)
    compiled = torch.compile(flex_attention)

    def run(q, k, v):
        return compiled(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=True)

    q, k, v = qkv(device, hq=4, hkv=2)
    check_forward_backward(run, q, k, v, score_cpu, mask_cpu, atol=1e-4, rtol=1e-4)


def test_compiled_inference(device):
    """no_grad: on the host driver Inductor's C++ flex_attention template runs over musa memory."""
    block_mask = create_block_mask(causal, None, None, S, S, device=device)
    q, k, v = qkv(device, grad=False)
    with torch.no_grad():
        out, codes = run_and_get_code(torch.compile(flex_attention), q, k, v, block_mask=block_mask)
    assert out.device == device
    code = "\n".join(codes)
    assert "@triton.jit" in code if ON_GPU else ('extern "C"' in code and "bmm" not in code)  # the C++ template
    ref, _ = reference(q, k, v, mask_mod=causal)
    torch.testing.assert_close(out.cpu().double(), ref, atol=2e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- the wrappers
def test_cpu_and_other_devices_keep_torch_behaviour():
    """The wrappers change musa calls only: CPU backward is still refused, CPU inference is torch's,
    devices outside torch's list still get torch's error, and Inductor's configs are torch's."""
    import torch.nn.attention.flex_attention as fa
    from torch._inductor.choices import InductorChoices

    assert hasattr(fa._validate_device, "__wrapped__") and hasattr(InductorChoices.get_config_heuristics, "__wrapped__")
    q, k, v = qkv("cpu", grad=True)
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex_attention(q, k, v)
    q, k, v = qkv("cpu", grad=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = flex_attention(q, k, v, block_mask=create_block_mask(causal, None, None, S, S, device="cpu"))
    torch.testing.assert_close(out.double(), reference(q, k, v, mask_mod=causal)[0], atol=2e-5, rtol=1e-5)
    meta = torch.empty(1, 1, 16, 16, device="meta")
    with pytest.raises(ValueError, match="only supported on"):
        fa._validate_device(meta, meta, meta)
    choices = InductorChoices()
    for device_type in ("cpu", "cuda", "xpu", "meta"):
        wrapped = choices.get_config_heuristics(device_type)
        assert type(wrapped) is type(InductorChoices.get_config_heuristics.__wrapped__(choices, device_type))
    expected = "cuda" if ON_GPU else "musa"
    assert type(choices.get_config_heuristics("musa")) is type(
        InductorChoices.get_config_heuristics.__wrapped__(choices, expected))
