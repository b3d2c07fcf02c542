"""torch_musa demo: train a small CNN and a tiny transformer language model on
synthetic data, on musa and on the CPU from the same initial weights, and print
the losses side by side.

    python examples/demo.py [--steps N]
"""
import argparse
import copy

import torch
import torch.nn as nn


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Linear(32 * 16, classes)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=64, heads=4, layers=2, seq=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(d, vocab)

    def forward(self, idx):
        t = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        return self.out(self.blocks(x, mask=mask, is_causal=True))


def train(model, batches, device, steps, loss_fn):
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for step in range(steps):
        x, y = (t.to(device) for t in batches[step % len(batches)])
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}; musa: {torch.musa.device_count()} device(s), driver "
          f"'{torch.musa.get_driver_name()}', {torch.musa.get_device_name()}")

    images = [(torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))) for _ in range(4)]
    cnn = SmallCNN()
    ce = nn.functional.cross_entropy
    cnn_cpu, cnn_musa = train(cnn, images, "cpu", args.steps, ce), train(cnn, images, "musa", args.steps, ce)

    text = [torch.randint(0, 64, (8, 33)) for _ in range(4)]
    lm_batches = [(t[:, :-1], t[:, 1:]) for t in text]
    lm = TinyLM()
    lm_loss = lambda logits, y: ce(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))  # noqa: E731
    lm_cpu, lm_musa = train(lm, lm_batches, "cpu", args.steps, lm_loss), train(lm, lm_batches, "musa", args.steps, lm_loss)

    print(f"\n{'step':>4} | {'CNN cpu':>9} {'CNN musa':>9} | {'LM cpu':>9} {'LM musa':>9}")
    for i in range(0, args.steps, max(1, args.steps // 10)):
        print(f"{i:>4} | {cnn_cpu[i]:9.4f} {cnn_musa[i]:9.4f} | {lm_cpu[i]:9.4f} {lm_musa[i]:9.4f}")
    worst = max(max(abs(a - b) for a, b in zip(cnn_cpu, cnn_musa)), max(abs(a - b) for a, b in zip(lm_cpu, lm_musa)))
    print(f"\nlargest |cpu - musa| loss difference: {worst:.2e}")
    print(f"musa memory: {torch.musa.memory_allocated() / 2**20:.1f} MiB allocated, "
          f"{torch.musa.max_memory_allocated() / 2**20:.1f} MiB peak")


if __name__ == "__main__":
    main()
