#!/usr/bin/env python
"""Build a custom C++ op with torch.utils.cpp_extension and train with it on CUDA.

The op (bias + GELU fused into one call) is written against ATen, so it runs on
whatever device its tensors live on; its backward is plain PyTorch.
"""
import argparse
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import CUDA_HOME, load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>

// Fused bias + GELU.  Device checks are done by ATen.
torch::Tensor bias_gelu(torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(x.size(-1) == bias.size(0), "bias_gelu: bias has ", bias.size(0),
              " elements, expected ", x.size(-1));
  return torch::gelu(x + bias);
}
"""


def build_extension():
    print(f"CUDA_HOME={CUDA_HOME}  (nvcc is only needed for .cu sources)")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    return load_inline(
        name="corpus_bias_gelu",
        cpp_sources=CPP_SOURCE,
        functions=["bias_gelu"],
        extra_cflags=["-O2"],
        verbose=False,
    )


class BiasGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bias, ext):
        ctx.save_for_backward(x, bias)
        return ext.bias_gelu(x, bias)

    @staticmethod
    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        with torch.enable_grad():
            x_, b_ = x.detach().requires_grad_(), bias.detach().requires_grad_()
            out = torch.nn.functional.gelu(x_ + b_)
            gx, gb = torch.autograd.grad(out, (x_, b_), grad)
        return gx, gb, None


class MLP(nn.Module):
    def __init__(self, ext):
        super().__init__()
        self.ext = ext
        self.fc1 = nn.Linear(8, 32, bias=False)
        self.bias = nn.Parameter(torch.zeros(32))
        self.fc2 = nn.Linear(32, 1)

    def forward(self, x):
        return self.fc2(BiasGelu.apply(self.fc1(x), self.bias, self.ext))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    ext = build_extension()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    x = torch.randn(4, 32, device=device)
    b = torch.randn(32, device=device)
    expected = torch.nn.functional.gelu(x + b)
    torch.testing.assert_close(ext.bias_gelu(x, b), expected)

    torch.manual_seed(0)
    model = MLP(ext).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data, target = torch.randn(64, 8, device=device), torch.randn(64, 1, device=device)
    for _ in range(args.steps):
        loss = nn.functional.mse_loss(model(data), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    param = next(model.parameters())
    print(f"[build_ext] OK device={param.device} is_cuda={param.is_cuda} loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
