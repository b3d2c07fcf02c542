"""``torch_musa.multi_tensor_apply``: Apex's multi-tensor applier under torch_musa's module path.

``multi_tensor_applier(op, noop_flag, tensor_lists, *args)`` calls ``op(chunk_size, noop_flag,
tensor_lists, *args)``, as Apex's and torch_musa's do. The ops here run on torch's multi-tensor
(``_foreach``) kernels, a few launches per list through the op layer:

* :func:`multi_tensor_scale` -- ``out[i] = in[i] * scale``; ``noop_flag`` becomes 1 if any input
  has an inf or NaN (GradScaler-style overflow check);
* :func:`multi_tensor_l2norm` -- the L2 norm over all tensors (a 1-element float32 tensor) and,
  with ``per_tensor=True``, each tensor's norm; ``noop_flag`` becomes 1 if it is not finite.
"""
from typing import List, Sequence, Tuple

import torch


class MultiTensorApply:
    """Calls a multi-tensor op with the chunk size it splits its lists by (kept for Apex's
    signature: the _foreach kernels choose their own chunking)."""

    available = True
    warned = False

    def __init__(self, chunk_size: int):
        self.chunk_size = chunk_size

    def check_avail(self) -> None:
        """Always available: the ops need no separately built extension."""

    def __call__(self, op, noop_flag_buffer: torch.Tensor, tensor_lists: Sequence[List[torch.Tensor]], *args):
        return op(self.chunk_size, noop_flag_buffer, tensor_lists, *args)


def _flag_if_not_finite(noop_flag: torch.Tensor, values: torch.Tensor) -> None:
    # (no host sync: the flag is raised on the device, as the fused kernels do)
    noop_flag.copy_(torch.where(torch.isfinite(values).all(), noop_flag, torch.ones_like(noop_flag)))


def multi_tensor_scale(chunk_size: int, noop_flag: torch.Tensor, tensor_lists, scale: float) -> None:
    """``tensor_lists = [inputs, outputs]``: each output gets its input times ``scale``, in the
    output's dtype (fp16 gradients into fp32 master gradients, for example)."""
    inputs, outputs = tensor_lists
    if len(inputs) != len(outputs):
        raise ValueError(f"multi_tensor_scale: {len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        return
    norms = torch._foreach_norm(inputs, float("inf"))
    _flag_if_not_finite(noop_flag, torch.stack([n.float() for n in norms]))
    scaled = torch._foreach_mul([t.float() for t in inputs], scale)
    torch._foreach_copy_(outputs, scaled)


def multi_tensor_l2norm(chunk_size: int, noop_flag: torch.Tensor, tensor_lists,
                        per_tensor: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """``tensor_lists = [tensors]``: (total L2 norm as a 1-element float32 tensor, per-tensor
    norms as a float32 tensor, or an empty one unless ``per_tensor``)."""
    (tensors,) = tensor_lists
    device = noop_flag.device
    if not tensors:
        return torch.zeros(1, device=device), torch.zeros(0, device=device)
    norms = torch.stack([n.float() for n in torch._foreach_norm([t.float() for t in tensors])])
    total = torch.linalg.vector_norm(norms).reshape(1)
    _flag_if_not_finite(noop_flag, total)
    return total, norms if per_tensor else torch.zeros(0, device=device)


multi_tensor_applier = MultiTensorApply(2048 * 32)

__all__ = ["MultiTensorApply", "multi_tensor_applier", "multi_tensor_l2norm", "multi_tensor_scale"]
