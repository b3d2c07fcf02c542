"""torch.distributed's c10d (torch 2.11-2.15): monitored_barrier accepts pure Gloo groups only. On a
group with mccl for musa it runs mccl's monitored barrier (on the group's CPU store, naming the
ranks that did not come, as Gloo's); every other group goes to torch's function."""
import functools

import torch

from .registry import gate


def _mccl_backend(group):
    """The mccl backend of ``group`` (None: the default group) for musa, or None if it has none."""
    import torch.distributed as dist

    from ..distributed import ProcessGroupMCCL

    pg = dist.distributed_c10d._get_default_group() if group is None else group
    try:
        backend = pg._get_backend(torch.device("musa"))
    except (RuntimeError, ValueError):
        return None
    return backend if isinstance(backend, ProcessGroupMCCL) else None


@gate("torch.distributed.distributed_c10d", "monitored_barrier", "accepts pure Gloo groups only; a group with "
      "mccl for musa runs mccl's monitored barrier (naming the ranks that did not come)",
      aliases=[("torch.distributed", "monitored_barrier")])
def _wrap_monitored_barrier(torch_fn):
    @functools.wraps(torch_fn)
    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        import torch.distributed as dist

        if not dist.is_initialized() or dist.distributed_c10d._rank_not_in_group(group) \
                or dist.get_backend(group) == dist.Backend.GLOO:
            return torch_fn(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
        backend = _mccl_backend(group)
        if backend is None:
            return torch_fn(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)
        from datetime import timedelta

        if timeout is None:
            timeout = dist.distributed_c10d._get_default_timeout(dist.get_backend(group))
        elif isinstance(timeout, (int, float)):
            timeout = timedelta(seconds=timeout)
        return backend.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)

    return monitored_barrier
