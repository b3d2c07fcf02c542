"""torch_musa.fp8's training recipe: Float8Linear against nn.Linear, a small transformer trained
with each recipe against its bf16 run, autocast, activation checkpointing, torch.compile,
state_dict, module filtering, and torchao's float8 on musa."""
import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from torch_musa import fp8

RECIPES = ["tensorwise", "rowwise"]


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, d=64, heads=4, layers=1, seq=32, ckpt=False):
        super().__init__()
        self.emb, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.zeros(seq, d))
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln, self.lm_head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.ckpt = ckpt

    def forward(self, idx):
        x = self.emb(idx) + self.pos[: idx.shape[1]]
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if self.ckpt else blk(x)
        return self.lm_head(self.ln(x))


def batches(steps, batch=8, seq=33, vocab=64, seed=0):
    # Sequences of a noisy affine recurrence: learnable, so the loss falls well below log(vocab).
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        start = torch.randint(0, vocab, (batch, 1), generator=g)
        step = torch.randint(1, 5, (batch, 1), generator=g)
        seqs = (start + step * torch.arange(seq)) % vocab
        noise = torch.rand(batch, seq, generator=g) < 0.1
        yield torch.where(noise, torch.randint(0, vocab, (batch, seq), generator=g), seqs)


def train(model, device, steps, lr=3e-3):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for data in batches(steps):
        data = data.to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def not_lm_head(mod, fqn):
    return fqn != "lm_head"


@pytest.mark.parametrize("recipe", RECIPES)
def test_float8_linear_matches_linear(device, recipe):
    torch.manual_seed(0)
    ref = nn.Linear(64, 48).to(device)
    f8 = fp8.Float8Linear.from_float(copy.deepcopy(ref), fp8.Float8LinearConfig(recipe=recipe))
    assert f8.weight is not ref.weight and torch.equal(f8.weight, ref.weight)
    x = torch.randn(4, 10, 64, device=device)  # 40 rows: not a multiple of 16 (padded for grad-weight)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    with torch.autocast(device.type, dtype=torch.bfloat16):
        y1, y2 = ref(x1), f8(x2)
    assert y2.dtype == torch.bfloat16 and y2.shape == y1.shape
    g = torch.randn_like(y1)
    y1.backward(g)
    y2.backward(g)

    def rel(a, b):
        return ((a.float() - b.float()).norm() / a.float().norm()).item()

    assert rel(y1, y2) < 0.08
    assert rel(x1.grad, x2.grad) < 0.12  # e5m2 gradients: 2 mantissa bits
    assert rel(ref.weight.grad, f8.weight.grad) < 0.12
    assert f8.weight.grad.dtype == torch.float32 and rel(ref.bias.grad, f8.bias.grad) < 0.02


def test_float8_linear_without_autocast_keeps_the_input_dtype(device):
    f8 = fp8.Float8Linear(32, 16, device=device)
    assert f8(torch.randn(16, 32, device=device)).dtype == torch.float32
    assert f8(torch.randn(16, 32, device=device, dtype=torch.bfloat16).requires_grad_()).dtype == torch.bfloat16


STEPS = 200


@pytest.fixture(scope="module")
def bf16_run():
    """The bf16 reference: its initial weights and its losses (shared by both recipes' tests)."""
    device = torch.device("musa", 0)
    torch.manual_seed(0)
    base = TinyGPT().to(device)
    init = copy.deepcopy(base)
    return init, train(base, device, STEPS)


@pytest.mark.parametrize("recipe", RECIPES)
def test_transformer_trains_within_3_percent_of_bf16(device, recipe, bf16_run):
    init, ref_losses = bf16_run
    f8_model = fp8.convert_to_float8_training(copy.deepcopy(init), config=fp8.Float8LinearConfig(recipe=recipe),
                                              module_filter_fn=not_lm_head)
    n_f8 = sum(isinstance(m, fp8.Float8Linear) for m in f8_model.modules())
    assert n_f8 == 4 and type(f8_model.lm_head) is nn.Linear
    f8_losses = train(f8_model, device, STEPS)
    ref_final, f8_final = sum(ref_losses[-20:]) / 20, sum(f8_losses[-20:]) / 20
    assert ref_final < 0.6 * math.log(64)  # it learned
    assert abs(f8_final - ref_final) <= 0.03 * ref_final, (ref_final, f8_final)


def test_activation_checkpointing_gives_the_same_gradients(device):
    torch.manual_seed(0)
    a = fp8.convert_to_float8_training(TinyGPT().to(device), module_filter_fn=not_lm_head)
    b = copy.deepcopy(a)
    b.ckpt = True
    data = next(batches(1)).to(device)
    for m in (a, b):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            m(data[:, :-1]).float().logsumexp(-1).sum().backward()
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.equal(p.grad, q.grad), n  # the recomputed forward casts the same values


def test_state_dict_stays_high_precision_and_loads_into_plain_linear(device):
    model = fp8.convert_to_float8_training(TinyGPT().to(device))
    sd = model.state_dict()
    assert all(v.dtype == torch.float32 for v in sd.values())
    plain = TinyGPT().to(device)
    plain.load_state_dict(sd)
    assert torch.equal(plain.blocks[0].fc1.weight, model.blocks[0].fc1.weight)


def test_module_filter_and_indivisible_layers_stay_linear(device):
    m = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 10), nn.Linear(10, 64)).to(device)
    fp8.convert_to_float8_training(m, module_filter_fn=lambda mod, fqn: fqn != "0")
    assert [type(x) for x in m] == [nn.Linear, nn.Linear, nn.Linear]
    m2 = fp8.convert_to_float8_training(nn.Sequential(nn.Linear(32, 32)).to(device))
    assert isinstance(m2[0], fp8.Float8Linear)
    with pytest.raises(ValueError, match="divisible by 16"):
        fp8.Float8Linear(10, 32)
    with pytest.raises(ValueError, match="recipe"):
        fp8.Float8LinearConfig(recipe="blockwise")
    with pytest.raises(ValueError, match="e5m2 x e5m2"):
        fp8.Float8LinearConfig(input_dtype=torch.float8_e5m2, weight_dtype=torch.float8_e5m2)


def test_torch_compile(device):
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32)).to(device)
    fp8.convert_to_float8_training(eager)
    twin = copy.deepcopy(eager)
    compiled = torch.compile(twin)
    x = torch.randn(16, 32, device=device)
    outs = []
    for m, layers in ((eager, eager), (compiled, twin)):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            y = m(x)
        y.float().square().sum().backward()
        outs.append((y, layers[0].weight.grad))
    assert outs[1][0].dtype == torch.bfloat16
    torch.testing.assert_close(outs[1][0].float(), outs[0][0].float(), rtol=2e-2, atol=2e-2)
    # Inductor fuses the bf16 elementwise ops, so a few values round differently before an FP8 cast.
    ga, gb = outs[0][1], outs[1][1]
    assert ((ga - gb).norm() / ga.norm()).item() < 2e-2


def test_torchao_float8_runs_on_musa(device):
    try:
        import torchao.float8 as ao
    except Exception as e:  # noqa: BLE001  (not installed, or not for this torch)
        pytest.skip(f"torchao.float8 does not import here: {e}")
    torch.manual_seed(0)
    base = TinyGPT().to(device)
    model = ao.convert_to_float8_training(copy.deepcopy(base), module_filter_fn=not_lm_head)
    assert sum(type(m).__name__ == "Float8Linear" for m in model.modules()) == 4
    ref, got = train(base, device, 40), train(model, device, 40)
    assert abs(sum(got[-10:]) - sum(ref[-10:])) <= 0.05 * sum(ref[-10:])


def test_layers_fed_the_same_tensor_share_one_cast(device, monkeypatch):
    from torch_musa.fp8 import casting

    calls = []
    real = casting.to_float8_tensorwise
    monkeypatch.setattr(casting, "to_float8_tensorwise", lambda x, *a, **k: calls.append(x.shape) or real(x, *a, **k))
    q, k = fp8.Float8Linear(32, 32, device=device), fp8.Float8Linear(32, 32, device=device)
    h = torch.randn(16, 32, device=device)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        yq, yk = q(h), k(h)
    assert len(calls) == 3  # the input once, each weight once
    h.add_(1.0)  # a changed tensor is cast again
    with torch.autocast(device.type, dtype=torch.bfloat16):
        yq2 = q(h)
    assert len(calls) == 5
    ref = fp8.Float8Linear(32, 32, device=device)
    ref.load_state_dict(q.state_dict())
    with torch.autocast(device.type, dtype=torch.bfloat16):
        assert torch.equal(ref(h.clone()), yq2)
