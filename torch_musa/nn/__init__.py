"""torch_musa.nn: torch_musa's additions to torch.nn (the fused LLM ops, see fused_ops)."""

from . import fused_ops  # noqa: F401
