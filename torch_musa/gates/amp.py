"""Autocast's legacy switch (torch 2.11-2.15): torch.set_autocast_enabled(bool), without a device
type, sets CUDA's autocast; torch_musa programs call it for musa, the machine's GPU. It still sets
CUDA's (torch's behaviour), and musa's with it; calls naming a device are torch's."""
import functools

from .registry import gate


@gate("torch", "set_autocast_enabled", "the legacy form without a device type sets CUDA's autocast only; it sets "
      "musa's too (CUDA's as before)")
def _wrap_set_autocast_enabled(torch_fn):
    @functools.wraps(torch_fn)
    def set_autocast_enabled(*args, **kwargs):
        torch_fn(*args, **kwargs)
        if len(args) + len(kwargs) == 1 and "device_type" not in kwargs:
            torch_fn("musa", *args, **kwargs)

    return set_autocast_enabled
