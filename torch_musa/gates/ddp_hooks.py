"""DDP's comm hooks (torch 2.11-2.15): DistributedDataParallel admits bf16_compress_hook by name
only in a torch built with CUDA and NCCL 2.10+ (or XPU), and the PowerSGD hooks call
torch.cuda.synchronize with a bucket's device whenever CUDA is present. A musa DDP's buckets go
through mccl, which reduces bfloat16 on both drivers, and musa devices synchronize musa."""
import functools

from . import _args
from .registry import gate


@gate("torch.cuda", "synchronize", "rejects a musa device (\"Expected a cuda device\"), which DDP's PowerSGD "
      "hooks pass whenever CUDA is present; a musa device synchronizes musa")
def _wrap_cuda_synchronize(torch_fn):
    @functools.wraps(torch_fn)
    def synchronize(device=None):
        if _args.is_musa_device(device):
            from .._core import device as _device

            return _device.synchronize(device)
        return torch_fn(device)

    return synchronize


@gate("torch.nn.parallel.distributed", "DistributedDataParallel._check_comm_hook", "admits bf16_compress_hook "
      "only with CUDA and NCCL 2.10+ (or XPU); a musa DDP checks it as any other hook (its signature)")
def _wrap_check_comm_hook(torch_fn):
    @functools.wraps(torch_fn)
    def _check_comm_hook(self, hook):
        if getattr(self, "device_type", None) != "musa" or not callable(hook) or \
                getattr(hook, "__name__", None) not in ("bf16_compress_hook", "bf16_compress_wrapper_hook"):
            return torch_fn(self, hook)

        @functools.wraps(hook)  # torch reads the signature through __wrapped__
        def checked_as(*args, **kwargs):
            return hook(*args, **kwargs)

        checked_as.__name__ = f"musa_{hook.__name__}"
        return torch_fn(self, checked_as)

    return _check_comm_hook
