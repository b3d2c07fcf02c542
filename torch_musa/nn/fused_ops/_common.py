"""What the fused ops share: the op namespace, input checks, and the test for a plain
(non-DTensor) tensor that the fused musa routes of torch's ops take."""

from __future__ import annotations

import sys

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ops = torch.ops.musa_fused  # schemas: backend/fused_llm/schemas.cpp

_cuda_lib = None
_aten_lib = None


def check_float(x: torch.Tensor, op: str, what: str) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(f"musa_fused::{op}: {what} must be float32, float16 or bfloat16, got {x.dtype}")


def cuda_impl(name: str, fn) -> None:
    """Registers fn as musa_fused::name's CUDA kernel, where torch is a CUDA build: the cuda
    driver's op layer delegates musa calls there (on CUDA aliases of the musa memory, on the
    current musa stream). Used where the kernel is torch's own op (RMSNorm); the others are
    registered in C++ (backend/fused_llm/*_cuda.cpp)."""
    global _cuda_lib
    if torch.version.cuda is None:
        return
    if _cuda_lib is None:
        _cuda_lib = torch.library.Library("musa_fused", "IMPL")
    _cuda_lib.impl(name, fn, "CUDA")


def is_dtensor(*ts) -> bool:
    dtensor = sys.modules.get("torch.distributed.tensor")  # not loaded: no tensor is a DTensor
    return dtensor is not None and any(isinstance(t, dtensor.DTensor) for t in ts)


def route_musa(aten_name: str, fn) -> bool:
    """Makes fn the musa kernel of torch's composite op aten::aten_name (the AutogradPrivateUse1
    key; every other device keeps torch's composite, which fn falls back to through
    OpOverload.decompose). A torch where the op is no longer a composite keeps its own kernel."""
    global _aten_lib
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{aten_name}", "CompositeImplicitAutograd"):
        return False
    if _aten_lib is None:
        _aten_lib = torch.library.Library("aten", "IMPL")
    _aten_lib.impl(aten_name, fn, "AutogradPrivateUse1")
    return True
