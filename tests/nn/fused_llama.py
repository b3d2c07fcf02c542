"""A small Llama-style decoder written with torch_musa's fused ops (nn.RMSNorm, nn.RoPE,
nn.SwishGLU, F.cross_entropy on 2-D logits), and the same model unfused (the float64-free
compositions of tests/nn/fused_reference.py in the model's dtype); both draw the same weights."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.nn import fused_reference as ref

VOCAB, DIM, HEADS, LAYERS, SEQ = 64, 32, 2, 2, 16


def rope_angles(seq=SEQ, head_dim=DIM // HEADS):
    inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    f = torch.outer(torch.arange(seq).float(), inv)
    return torch.cat([f, f], dim=-1)  # (seq, head_dim), Megatron's layout


class RMSNormUnfused(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return ref.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Block(nn.Module):
    def __init__(self, fused):
        super().__init__()
        norm = nn.RMSNorm if fused else RMSNormUnfused
        self.n1, self.n2 = norm(DIM, eps=1e-5), norm(DIM, eps=1e-5)
        self.qkv, self.o = nn.Linear(DIM, 3 * DIM, bias=False), nn.Linear(DIM, DIM, bias=False)
        self.w13, self.w2 = nn.Linear(DIM, 4 * DIM, bias=False), nn.Linear(2 * DIM, DIM, bias=False)
        self.fused = fused
        self.rope = nn.RoPE(rope_angles(), batch_first=True) if fused else None
        self.glu = nn.SwishGLU() if fused else ref.swish_glu

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, s, 3, HEADS, DIM // HEADS).unbind(2)
        if self.fused:
            q, k = self.rope(q), self.rope(k)
        else:
            f = rope_angles().to(x.device)
            q, k = ref.rope(q, f, batch_first=True), ref.rope(k, f, batch_first=True)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, DIM))
        return x + self.w2(self.glu(self.w13(self.n2(x))))


class Llama(nn.Module):
    def __init__(self, fused):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(Block(fused) for _ in range(LAYERS))
        self.norm = nn.RMSNorm(DIM, eps=1e-5) if fused else RMSNormUnfused(DIM, 1e-5)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.fused = fused

    def forward(self, tokens, targets):
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.norm(x)).flatten(0, 1)
        if self.fused:
            return F.cross_entropy(logits, targets.flatten())
        return ref.cross_entropy(logits, targets.flatten())


def pair(device, seed=0):
    """The fused and unfused models with the same weights, on device."""
    torch.manual_seed(seed)
    fused = Llama(True)
    unfused = Llama(False)
    unfused.load_state_dict(fused.state_dict(), strict=False)  # the fused blocks also hold the RoPE angles
    return fused.to(device), unfused.to(device)


def batches(n, batch=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, VOCAB, (batch, SEQ), generator=g), torch.randint(0, VOCAB, (batch, SEQ), generator=g))
            for _ in range(n)]


def train(model, data, device, step_fn=None, lr=1e-2):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    step = model if step_fn is None else step_fn
    losses = []
    for tok, tgt in data:
        loss = step(tok.to(device), tgt.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


assert math.isclose(rope_angles()[1, 0].item(), 1.0)
