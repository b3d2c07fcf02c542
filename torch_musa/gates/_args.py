"""Whether a wrapper's argument is musa's: the test every gate makes before leaving torch's path."""
import torch

from .._core import device as _device


def is_musa_tensor(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "musa"


def is_musa_device(d) -> bool:
    if isinstance(d, str):
        d = torch.device(d)
    return isinstance(d, torch.device) and d.type == "musa"


def is_musa_stream(s) -> bool:
    return isinstance(s, torch.Stream) and s.device.type == "musa"


def on_cuda_driver() -> bool:
    """musa is an NVIDIA GPU here (the cuda driver), so CUDA's tuned answers fit it."""
    return _device.get_driver_name() == "cuda"
