#!/usr/bin/env python
"""Mixed-precision CNN training on CUDA (torch.cuda.amp autocast + GradScaler)."""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader, TensorDataset

from common import get_device, report, seed_everything


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    seed_everything(0)
    torch.backends.cudnn.benchmark = True  # autotune convolutions on the GPU
    device = get_device()
    use_amp = device.type == "cuda"

    data = torch.randn(args.steps * args.batch_size, 3, 16, 16)
    labels = torch.randint(0, 10, (data.shape[0],))
    loader = DataLoader(TensorDataset(data, labels), batch_size=args.batch_size,
                        shuffle=True, pin_memory=torch.cuda.is_available())

    model = SmallCNN().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = GradScaler(enabled=use_amp)

    torch.cuda.reset_peak_memory_stats()
    start = time.time()
    for step, (x, y) in enumerate(loader):
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with autocast(enabled=use_amp):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        assert logits.dtype == torch.float16, logits.dtype  # autocast ran the conv/linear in half
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    torch.cuda.synchronize()
    print(f"{time.time() - start:.2f}s, peak CUDA memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")
    report("train_amp", model, loss.item())


if __name__ == "__main__":
    main()
