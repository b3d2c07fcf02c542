"""FP8 all-gather for FSDP2: weights are cast to float8 *before* the all-gather, so it moves one
byte per element instead of two (bf16) or four (fp32).

``WeightWithFloat8AllGather`` is the parameter's tensor while sharded (it wraps the
high-precision shard; the optimizer and state_dict see that). FSDP2 asks it for its all-gather
inputs (``fsdp_pre_all_gather``: the float8 shard, cast with one scale for the whole weight) and
builds the unsharded weight from the gathered bytes (``fsdp_post_all_gather``): a
``Float8AllGatheredWeight``, which Float8Linear's GEMMs use as is.

The scale must be the same on every rank: either the amax is all-reduced in each pre-all-gather
(one small all-reduce per weight), or ``precompute_float8_dynamic_scale_for_fsdp(model)`` after
each optimizer step computes every weight's scale with a single all-reduce.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import torch.nn as nn
from torch.utils._pytree import tree_map

from . import casting
from .config import Float8LinearConfig

aten = torch.ops.aten

# Ops FSDP2 applies to the sharded parameter that must keep the wrapper (sharding, padding,
# views, copies); every other op (optimizer math) sees the plain high-precision tensor.
_KEEP_WRAPPER = {
    aten.empty_like.default, aten.new_zeros.default, aten.new_empty.default, aten.slice.Tensor,
    aten.copy_.default, aten.view.default, aten.as_strided.default, aten._to_copy.default,
    aten._pin_memory.default, aten.split.Tensor, aten.clone.default, aten.detach.default,
    aten.alias.default, aten.zeros_like.default, aten.chunk.default, aten.narrow.default,
}


class WeightWithFloat8AllGather(torch.Tensor):
    """A high-precision weight whose FSDP2 all-gather moves float8 data."""

    @staticmethod
    def __new__(cls, tensor: torch.Tensor, config: Float8LinearConfig, precomputed_scale=None):
        return torch.Tensor._make_wrapper_subclass(
            cls, tensor.size(), strides=tensor.stride(), storage_offset=tensor.storage_offset(),
            dtype=tensor.dtype, device=tensor.device, layout=tensor.layout, requires_grad=tensor.requires_grad)

    def __init__(self, tensor, config, precomputed_scale=None):
        self._tensor = tensor
        self._config = config
        self._precomputed_scale = precomputed_scale

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        config = None

        def unwrap(t):
            nonlocal config
            if isinstance(t, WeightWithFloat8AllGather):
                config = config or t._config
                return t._tensor
            return t

        args, kwargs = tree_map(unwrap, args), tree_map(unwrap, kwargs or {})
        out = func(*args, **kwargs)
        if func not in _KEEP_WRAPPER:
            return out
        return tree_map(lambda t: WeightWithFloat8AllGather(t, config) if isinstance(t, torch.Tensor) else t, out)

    def __tensor_flatten__(self):
        return ["_tensor"], self._config

    @staticmethod
    def __tensor_unflatten__(inner, config, outer_size, outer_stride):
        return WeightWithFloat8AllGather(inner["_tensor"], config)

    def __repr__(self):
        return f"WeightWithFloat8AllGather(tensor={self._tensor}, dtype={self._config.weight_dtype})"

    def fsdp_pre_all_gather(self, mesh, outer_size=None, outer_stride=None, module=None, mp_policy=None):
        dtype = self._config.weight_dtype
        scale = self._precomputed_scale
        if scale is None:  # one scale for the whole weight: the amax of every shard
            amax = self._tensor.abs().amax().float()
            torch.distributed.all_reduce(amax, op=torch.distributed.ReduceOp.MAX, group=mesh.get_group())
            scale = casting.amax_to_scale(amax, dtype, self._config.power_of_2)
        c = casting.to_float8_tensorwise(self._tensor, dtype, scale=scale)
        return (c.data,), (c.scale,)

    def fsdp_post_all_gather(self, all_gather_outputs, metadata: Any, param_dtype: torch.dtype, *,
                             out: Optional[torch.Tensor] = None):
        (data,), (scale,) = all_gather_outputs, metadata
        if out is not None:  # later steps: the same gathered buffer, a new scale
            target = out._local_tensor if hasattr(out, "_local_tensor") else out
            target._scale = scale
            return
        return Float8AllGatheredWeight(data, scale, param_dtype), (data,)


class Float8AllGatheredWeight(torch.Tensor):
    """The unsharded weight after an FP8 all-gather: float8 data and its scale, standing for a
    weight of ``dtype``. Float8Linear reads ``_data``/``_scale``; anything else is refused."""

    @staticmethod
    def __new__(cls, data: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype):
        return torch.Tensor._make_wrapper_subclass(
            cls, data.size(), strides=data.stride(), storage_offset=data.storage_offset(), dtype=dtype,
            device=data.device, requires_grad=False)

    def __init__(self, data, scale, dtype):
        self._data = data
        self._scale = scale

    __torch_function__ = torch._C._disabled_torch_function_impl

    _VIEWS = {aten.as_strided.default, aten.view.default, aten.detach.default, aten.alias.default,
              aten._unsafe_view.default}

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        w = args[0]
        if func in cls._VIEWS and isinstance(w, Float8AllGatheredWeight):
            data = func(w._data, *args[1:], **kwargs)
            return Float8AllGatheredWeight(data, w._scale, w.dtype)
        raise NotImplementedError(
            f"{func} on an FSDP2 float8 all-gathered weight: only Float8Linear's GEMMs read it. Keep modules "
            "that use the weight otherwise out of convert_to_float8_training (module_filter_fn), or set "
            "Float8LinearConfig(enable_fsdp_float8_all_gather=False)")

    def __tensor_flatten__(self):
        return ["_data", "_scale"], self.dtype

    @staticmethod
    def __tensor_unflatten__(inner, dtype, outer_size, outer_stride):
        return Float8AllGatheredWeight(inner["_data"], inner["_scale"], dtype)

    def __repr__(self):
        return f"Float8AllGatheredWeight(data={self._data}, scale={self._scale}, dtype={self.dtype})"


@torch.no_grad()
def precompute_float8_dynamic_scale_for_fsdp(module: nn.Module) -> None:
    """After each optimizer step: every FP8-all-gather weight's scale from one all-reduce of all
    their amaxes (instead of one all-reduce per weight in the next all-gather)."""
    from torch.distributed.tensor import DTensor

    weights = [p for p in module.parameters()
               if isinstance(p, DTensor) and isinstance(p._local_tensor, WeightWithFloat8AllGather)]
    if not weights:
        return
    locals_ = [p._local_tensor._tensor for p in weights]
    amaxes = torch.stack([t.abs().amax().float() if t.numel() else t.new_zeros((), dtype=torch.float32)
                          for t in locals_])
    mesh = weights[0].device_mesh
    torch.distributed.all_reduce(amaxes, op=torch.distributed.ReduceOp.MAX, group=mesh.get_group())
    for p, amax in zip(weights, amaxes):
        cfg = p._local_tensor._config
        p._local_tensor._precomputed_scale = casting.amax_to_scale(amax, cfg.weight_dtype, cfg.power_of_2)
