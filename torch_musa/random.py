"""Random number generator state for musa devices, like torch.cuda.random."""
import contextlib
from typing import Iterable, List

import torch

from . import _C
from ._core.device import _check_index, _index, device_count


def _generator(device=None) -> torch.Generator:
    return _C._default_generator(_check_index(_index(device)))


def default_generators() -> tuple:
    return tuple(_C._default_generator(i) for i in range(device_count()))


def manual_seed(seed: int) -> None:
    """Seeds the current musa device's generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in default_generators():
        g.manual_seed(int(seed))


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    s = _generator(0).seed() if device_count() else None
    for g in default_generators()[1:]:
        g.manual_seed(s)


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device="musa") -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> List[torch.Tensor]:
    return [g.get_state() for g in default_generators()]


def set_rng_state(new_state: torch.Tensor, device="musa") -> None:
    _generator(device).set_state(new_state.clone(memory_format=torch.contiguous_format))


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng", _devices_kw: str = "devices",
             device_type: str = "musa") -> contextlib.AbstractContextManager:
    """torch.random.fork_rng for musa (torch_musa's ``torch_musa.fork_rng``): inside the block the CPU
    and the given musa devices' generators (all of them by default) may be used freely; at its
    end their states are restored."""
    return torch.random.fork_rng(devices=devices, enabled=enabled, _caller=_caller, _devices_kw=_devices_kw,
                                 device_type=device_type)
