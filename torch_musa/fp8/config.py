"""Float8LinearConfig: how Float8Linear scales and casts its three GEMMs' operands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

_RECIPES = ("tensorwise", "rowwise")


@dataclass(frozen=True)
class Float8LinearConfig:
    """``recipe="tensorwise"``: one dynamic scale per tensor; activations and weights in e4m3,
    gradients in e5m2 (more range). ``recipe="rowwise"``: one scale per row of each GEMM operand
    (per column where the GEMM contracts over rows), all e4m3, scales rounded down to powers of
    two (exact rescaling), bf16 GEMM outputs. Scaling is dynamic: each cast computes its amax.

    ``enable_fsdp_float8_all_gather``: under FSDP2, weights are cast to float8 before the
    all-gather (half the bytes of bf16); see torch_musa.fp8.precompute_float8_dynamic_scale_for_fsdp.
    ``use_fast_accum``: the forward GEMM accumulates with cuBLASLt's fast mode (the backward's never).
    """

    recipe: str = "tensorwise"
    input_dtype: torch.dtype = torch.float8_e4m3fn
    weight_dtype: torch.dtype = torch.float8_e4m3fn
    grad_dtype: Optional[torch.dtype] = None  # None: e5m2 for tensorwise, e4m3 for rowwise
    round_scales_to_power_of_2: Optional[bool] = None  # None: False for tensorwise, True for rowwise
    use_fast_accum: bool = True
    enable_fsdp_float8_all_gather: bool = False

    def __post_init__(self):
        if self.recipe not in _RECIPES:
            raise ValueError(f"Float8LinearConfig: recipe must be one of {_RECIPES}, got {self.recipe!r}")
        for name in ("input_dtype", "weight_dtype", "grad_dtype"):
            dt = getattr(self, name)
            if dt is not None and dt not in (torch.float8_e4m3fn, torch.float8_e5m2):
                raise ValueError(f"Float8LinearConfig: {name} must be torch.float8_e4m3fn or torch.float8_e5m2, got {dt}")
        if self.input_dtype == self.weight_dtype == torch.float8_e5m2:
            raise ValueError("Float8LinearConfig: e5m2 x e5m2 GEMMs are not supported; use e4m3 for input or weight")
        if self.enable_fsdp_float8_all_gather and self.recipe != "tensorwise":
            raise ValueError("Float8LinearConfig: enable_fsdp_float8_all_gather needs recipe='tensorwise' "
                             "(one scale per weight, shared by all shards)")

    @property
    def gradient_dtype(self) -> torch.dtype:
        if self.grad_dtype is not None:
            return self.grad_dtype
        return torch.float8_e5m2 if self.recipe == "tensorwise" else torch.float8_e4m3fn

    @property
    def power_of_2(self) -> bool:
        if self.round_scales_to_power_of_2 is not None:
            return self.round_scales_to_power_of_2
        return self.recipe == "rowwise"
