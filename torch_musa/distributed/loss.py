"""``parallel_fused_cross_entropy``: cross entropy over logits sharded along the vocabulary.

With tensor parallelism the logits of a language model's head come out sharded over the vocabulary
(a DTensor with ``Shard(1)`` on a 1-D mesh). Gathering them to compute the loss costs the full
(tokens x vocabulary) tensor on every rank; here each rank reduces its own shard to three numbers per
token (the shard's max, its sum of exponentials relative to that max, and the target's logit when
the target falls in the shard), the ranks all-gather those (3 x tokens values each), and every rank
finishes the softmax statistics, the loss and its gradient for its own shard. The result equals
``F.cross_entropy`` on the unsharded logits; the gradient stays sharded like the logits.

The gradient is computed in the forward (softmax minus the target's one-hot, scaled by the
reduction) and kept, so the backward is one multiplication by the incoming gradient.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["parallel_fused_cross_entropy"]

_REDUCTIONS = ("mean", "sum", "none")


def _shard_offset(global_width: int, rank: int, world: int) -> int:
    """Where rank's ``Shard(1)`` piece starts: DTensor splits like torch.chunk (equal pieces of
    ceil(width / world), the last ones shorter or empty)."""
    return min(rank * -(-global_width // world), global_width)


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, reduction, pg, offset, ignore_index):
        world = dist.get_world_size(pg) if pg is not None else 1
        x = logits.float()
        n, width = x.shape
        local_target = target - offset
        in_shard = (local_target >= 0) & (local_target < width)
        valid = target != ignore_index
        local_max = x.max(dim=1).values if width > 0 else x.new_full((n,), float("-inf"))
        safe_max = torch.where(torch.isfinite(local_max), local_max, torch.zeros_like(local_max))
        local_sum = torch.exp(x - safe_max[:, None]).sum(dim=1)
        picked = x.gather(1, local_target.clamp(0, max(width - 1, 0))[:, None]).squeeze(1) if width > 0 \
            else x.new_zeros(n)
        target_logit = torch.where(in_shard, picked, torch.zeros_like(picked))
        stats = torch.stack([safe_max, local_sum, target_logit])  # 3 x n
        if world > 1:
            every = torch.empty((world, 3, n), dtype=stats.dtype, device=stats.device)
            dist.all_gather_into_tensor(every, stats.contiguous(), group=pg)
        else:
            every = stats[None]
        global_max = every[:, 0].max(dim=0).values
        total = (every[:, 1] * torch.exp(every[:, 0] - global_max)).sum(dim=0)
        log_z = global_max + torch.log(total)
        losses = torch.where(valid, log_z - every[:, 2].sum(dim=0), torch.zeros_like(log_z))
        count = valid.sum()
        if reduction == "mean":
            loss, scale = losses.sum() / count, 1.0 / count.clamp(min=1).to(x.dtype)
        elif reduction == "sum":
            loss, scale = losses.sum(), torch.ones((), dtype=x.dtype, device=x.device)
        else:
            loss, scale = losses, None
        grad = torch.exp(x - log_z[:, None])
        rows = torch.arange(n, device=x.device)[in_shard]
        grad[rows, local_target[in_shard]] -= 1.0
        grad = grad * valid[:, None].to(grad.dtype)
        if scale is not None:
            grad = grad * scale
        ctx.save_for_backward(grad)
        ctx.logits_dtype = logits.dtype
        ctx.per_token = reduction == "none"
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors
        scale = grad_output[:, None] if ctx.per_token else grad_output
        return (grad * scale).to(ctx.logits_dtype), None, None, None, None, None


def _local(t):
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def parallel_fused_cross_entropy(input, target, reduction: str = "mean", pg=None, *, ignore_index: int = -100):
    """Cross entropy of logits ``input`` (N, C) against class indices ``target`` (N,).

    ``input``: a DTensor sharded along the classes (``Shard(1)``) over the tensor-parallel group
    ``pg`` (default: its mesh's group), or a plain tensor (one device, no parallelism). ``target``:
    the same on every rank (a tensor, or a replicated DTensor). ``reduction``: "mean", "sum" or
    "none"; targets equal to ``ignore_index`` count for nothing (as in ``F.cross_entropy``).
    Returns the loss (a replicated DTensor for DTensor logits); its gradient reaches ``input``
    sharded like it. Computed in float32 whatever the logits' dtype.
    """
    from torch.distributed.tensor import DTensor, Replicate, Shard

    if reduction not in _REDUCTIONS:
        raise ValueError(f"parallel_fused_cross_entropy: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if input.dim() != 2:
        raise ValueError(f"parallel_fused_cross_entropy: input must be (N, C) logits, got shape {tuple(input.shape)}; "
                         "flatten the batch dims first (logits.view(-1, C), target.view(-1))")
    target = _local(target)
    if target.shape != (input.shape[0],):
        raise ValueError(f"parallel_fused_cross_entropy: target must be ({input.shape[0]},) class indices, "
                         f"got shape {tuple(target.shape)}")
    if not isinstance(input, DTensor):
        if pg is not None and dist.get_world_size(pg) > 1:
            raise ValueError("parallel_fused_cross_entropy: with a group of several ranks the logits must be a "
                             "DTensor sharded along the classes (distribute_tensor(x, mesh, [Shard(1)]))")
        return _VocabParallelCrossEntropy.apply(input, target, reduction, None, 0, ignore_index)
    mesh = input.device_mesh
    if mesh.ndim != 1 or input.placements[0] not in (Shard(1), Shard(-1)):
        raise ValueError(f"parallel_fused_cross_entropy: the logits must be sharded along the classes on a 1-D "
                         f"mesh (placements [Shard(1)]), got {input.placements} on a {mesh.ndim}-D mesh; "
                         "redistribute them (x.redistribute(mesh, [Shard(1)]))")
    pg = pg if pg is not None else mesh.get_group()
    world = dist.get_world_size(pg)
    offset = _shard_offset(input.shape[1], dist.get_rank(pg), world)
    local_logits = input.to_local(grad_placements=[Shard(1)])
    loss = _VocabParallelCrossEntropy.apply(local_logits, target.to(local_logits.device), reduction, pg, offset,
                                            ignore_index)
    return DTensor.from_local(loss, mesh, [Replicate()], run_check=False)
