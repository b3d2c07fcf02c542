"""``mccl``: torch.distributed's backend for musa tensors.

Registered with ``torch.distributed.Backend.register_backend(..., devices=["musa"])`` when torch_musa
loads, so ``init_process_group("mccl")``, ``init_process_group()`` with no backend on musa,
``"cpu:gloo,musa:mccl"`` and ``device_id=torch.device("musa", r)`` all resolve to it. Collectives run in
place on musa memory through the collective library of the driver's kernel device: NCCL on the cuda
driver, Gloo on the host driver (ProcessGroupMCCL in backend/distributed/).
"""
from __future__ import annotations

import os
from datetime import timedelta

import torch

from .. import _C

ProcessGroupMCCL = _C._distributed.ProcessGroupMCCL

# The cross-rank signature check (check_collectives_enabled): TORCH_MCCL_CHECK_COLLECTIVES=0/1.
# TORCH_MCCL_* mirror the TORCH_NCCL_* knobs; on the cuda driver they are handed to NCCL's backend.
_KNOBS = ("ASYNC_ERROR_HANDLING", "BLOCKING_WAIT", "DUMP_ON_TIMEOUT", "TRACE_BUFFER_SIZE", "DEBUG_INFO_TEMP_FILE",
          "ENABLE_MONITORING", "HEARTBEAT_TIMEOUT_SEC", "AVOID_RECORD_STREAMS", "DESYNC_DEBUG")


def is_available() -> bool:
    """Whether torch.distributed exists in this torch build (mccl needs nothing else)."""
    return torch.distributed.is_available()


def _library_name() -> str:
    from .._core.device import get_driver_name

    return "nccl" if get_driver_name() == "cuda" else "gloo"


def _mirror_knobs() -> None:
    for knob in _KNOBS:
        value = os.environ.get(f"TORCH_MCCL_{knob}")
        if value is not None:
            os.environ.setdefault(f"TORCH_NCCL_{knob}", value)


def check_collectives_enabled(library: str | None = None) -> bool:
    """Whether new mccl groups compare each collective's signature across ranks before running it.

    torch's convention: off on the cuda driver (NCCL), where torch has no such check and a mismatch
    ends in NCCL's watchdog timeout; on on the host driver (Gloo), where a mismatch aborts the whole
    process. TORCH_DISTRIBUTED_DEBUG=DETAIL turns it on (as it turns torch's collective checks on);
    TORCH_MCCL_CHECK_COLLECTIVES=0/1 overrides all of these.
    """
    explicit = os.environ.get("TORCH_MCCL_CHECK_COLLECTIVES")
    if explicit is not None and explicit.strip() != "":
        return explicit.strip().lower() not in ("0", "false", "no", "off")
    if os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
        return True
    return (library or _library_name()) == "gloo"


def _create_backend(dist_opts, backend_options):
    """torch.distributed's creator for "mccl" (extended API): the library's backend, wrapped."""
    import torch.distributed as dist

    store, rank, size = dist_opts.store, dist_opts.group_rank, dist_opts.group_size
    timeout = dist_opts.timeout if isinstance(dist_opts.timeout, timedelta) else timedelta(seconds=dist_opts.timeout)
    if _library_name() == "nccl":
        _mirror_knobs()
        # NCCL reduces float8 itself from 2.24; before, mccl reduces it as float32 (backend/distributed)
        _C._distributed._set_nccl_has_float8(tuple(torch.cuda.nccl.version()[:2]) >= (2, 24))
        opts = backend_options if isinstance(backend_options, dist.ProcessGroupNCCL.Options) else \
            dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        if dist_opts.global_ranks_in_group:
            opts.global_ranks_in_group = dist_opts.global_ranks_in_group
        if dist_opts.group_id:
            opts.group_name = dist_opts.group_id
        parent = _split_source()
        if parent is not None:  # as torch does for nccl: the new communicator splits off the default one
            opts.split_from = parent.library
            opts.split_color = dist.distributed_c10d._process_group_color(dist_opts.global_ranks_in_group)
        library = dist.ProcessGroupNCCL(store, rank, size, opts)
    else:
        library = dist.ProcessGroupGloo(store, rank, size, timeout=timeout)
    library._set_sequence_number_for_group()
    checker = None
    if size > 1 and check_collectives_enabled():
        # Ranks compare each collective's signature over a CPU channel of their own first: a mismatch
        # becomes an error naming the op instead of a crash in Gloo or a hang or silent mix in NCCL.
        checker = dist.ProcessGroupGloo(dist.PrefixStore("mccl_check/", store), rank, size, timeout=timeout)
    backend = ProcessGroupMCCL(library, checker, rank, size)
    backend._set_store(dist.PrefixStore("mccl/", store))  # where its split groups rendezvous (Gloo)
    return backend


def _split_source():
    """The default group's mccl backend when new groups split off it (it is bound to a device)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return None
    pg = dist.distributed_c10d._get_default_group()
    if not pg.bound_device_id or pg.bound_device_id.type != "musa":
        return None
    backend = pg._get_backend(pg.bound_device_id)
    return backend if isinstance(backend, ProcessGroupMCCL) else None


def is_mccl_available() -> bool:
    """Like torch.distributed.is_nccl_available(): True once torch_musa registered mccl."""
    return is_available() and "MCCL" in torch.distributed.Backend._plugins


def staged_counts() -> dict:
    """Collectives whose tensors were staged through a contiguous copy (non-contiguous layouts), by op."""
    return dict(_C._distributed._staged_counts())


def reset_staged_counts() -> None:
    _C._distributed._reset_staged_counts()


def collective_bytes() -> dict:
    """Per mccl collective run by this process: {"calls": n, "bytes": b}, where b counts the bytes of
    the tensors this rank contributed (an all-gather's shard, an all-reduce's tensor). FP8
    all-gather shows here as half the all_gather bytes of bf16."""
    return {op: {"calls": c, "bytes": b} for op, (c, b) in _C._distributed._sent_bytes().items()}


def reset_collective_bytes() -> None:
    _C._distributed._reset_sent_bytes()


def _register() -> None:
    if not is_available():
        return
    import torch.distributed as dist

    # mccl's Gloo groups for split_group() are made here, where ProcessGroupGloo is reachable.
    _C._distributed._set_gloo_factory(
        lambda store, rank, size, timeout: dist.ProcessGroupGloo(store, rank, size, timeout=timeout))
    if "MCCL" not in dist.Backend._plugins:
        dist.Backend.register_backend("mccl", _create_backend, extended_api=True, devices=["musa"])
    # The names torch.distributed offers for its own backends (is_nccl_available, ProcessGroupNCCL).
    dist.is_mccl_available = is_mccl_available
    dist.ProcessGroupMCCL = ProcessGroupMCCL


def _apply_distributed_patch() -> None:
    """torch_musa's hook that readies torch.distributed for musa (their package patches device mesh,
    FSDP, DTensor and c10d there). Here those work through torch's device-generic paths once mccl is
    musa's registered backend, and the few CUDA-only functions are wrapped when torch_musa loads
    (gates/c10d.py, gates/ddp_hooks.py): so this ensures the registration, and says when another
    backend holds musa (nothing torch_musa registers would then run)."""
    if not is_available():
        return
    _register()
    import torch.distributed as dist

    holder = dist.Backend.default_device_backend_map.get("musa")
    if holder != "mccl":
        raise RuntimeError(f"torch.distributed runs musa tensors with {holder or 'no backend'!r}, not torch_musa's "
                           "'mccl': something re-registered the musa device's backend; pass backend='mccl' "
                           "(or 'cpu:gloo,musa:mccl') to init_process_group")


__all__ = ["ProcessGroupMCCL", "check_collectives_enabled", "is_available", "is_mccl_available", "staged_counts", "reset_staged_counts",
           "collective_bytes", "reset_collective_bytes"]
