"""What torch.cuda reads from the device's management library (nvidia-smi's figures):
utilization, temperature, power, clocks, used memory and the processes using a device.

On the cuda driver a musa device is a CUDA GPU, so these are torch.cuda's own answers for that GPU
(through pynvml, as there). The host driver's devices are emulated in host memory: their used
memory and the process using them are known; they have no sensors, and asking for a sensor says so.
"""
import os

import torch

from .. import _C
from .device import _check_index, _index, _lazy_init, get_driver_name
from ..memory import mem_get_info


def _gpu(device) -> int:
    """The CUDA index of musa ``device`` on the cuda driver, or None on the host driver."""
    _lazy_init()
    index = _check_index(_index(device))
    return _C._driver_ordinal(index) if get_driver_name() == "cuda" else None


def _sensor(name: str, device):
    gpu = _gpu(device)
    if gpu is None:
        raise RuntimeError(f"torch.musa.{name}: the host driver's devices are emulated in host memory and have no "
                           f"sensors; run on the cuda driver (TORCH_MUSA_DRIVER=cuda) to read the GPU's")
    return getattr(torch.cuda, name)(gpu)


def utilization(device=None) -> int:
    """Percent of the last sample period in which a kernel ran (as torch.cuda.utilization)."""
    return _sensor("utilization", device)


def memory_usage(device=None) -> int:
    """Percent of the last sample period in which device memory was read or written."""
    return _sensor("memory_usage", device)


def temperature(device=None) -> int:
    """The GPU's temperature, degrees Celsius."""
    return _sensor("temperature", device)


def power_draw(device=None) -> int:
    """The GPU's power draw, milliwatts."""
    return _sensor("power_draw", device)


def clock_rate(device=None) -> int:
    """The GPU's current SM clock, MHz."""
    return _sensor("clock_rate", device)


def device_memory_used(device=None) -> int:
    """Device memory in use, bytes, by every process (nvidia-smi's figure); on the host driver
    the emulated device's, which only this process uses."""
    gpu = _gpu(device)
    if gpu is not None:
        return torch.cuda.device_memory_used(gpu)
    free, total = mem_get_info(device)
    return total - free


def list_gpu_processes(device=None) -> str:
    """The processes using the device and their memory, in torch.cuda.list_gpu_processes' format."""
    gpu = _gpu(device)
    if gpu is not None:
        return torch.cuda.list_gpu_processes(gpu)
    used = device_memory_used(device)
    lines = [f"GPU:{_index(device)}"]
    if used == 0:
        lines.append("no processes are running")
    else:
        lines.append(f"process {os.getpid():>10d} uses {used / (1024 * 1024):>12.3f} MB GPU memory")
    return "\n".join(lines)
