"""flex_attention (torch 2.11-2.15): the frontend's device check and Inductor's config choice both
hard-code a device list. A musa query passes the check; on the cuda driver musa gets CUDA's
configs (it is the same NVIDIA GPU)."""
import functools

import torch

from . import _args
from .registry import gate


@gate("torch.nn.attention.flex_attention", "_validate_device", "a hard-coded list (cuda, cpu, xpu, hpu, mps) "
      "refuses musa; a musa query passes (eager runs torch's dense implementation over musa memory)")
def _wrap_validate_device(torch_fn):
    @functools.wraps(torch_fn)
    def _validate_device(query, key, value):
        # Like torch, only the query is looked at: flex_attention has checked q, k, v share a device.
        if isinstance(query, torch.Tensor) and query.device.type == "musa":
            return None
        return torch_fn(query, key, value)

    return _validate_device


@gate("torch._inductor.choices", "InductorChoices.get_config_heuristics", "a hard-coded list gives other devices "
      "generic configs (16x16 flex backward blocks); on the cuda driver musa gets CUDA's")
def _wrap_get_config_heuristics(torch_fn):
    @functools.wraps(torch_fn)
    def get_config_heuristics(self, device_type="cuda"):
        if device_type == "musa" and _args.on_cuda_driver():
            device_type = "cuda"
        return torch_fn(self, device_type)

    return get_config_heuristics
