"""``torch_musa.core.serialization``: torch.load/torch.save with musa locations. musa storages
are tagged and restored by torch's own PrivateUse1 support; torch_musa._core.serialization adds the
error for CUDA checkpoints loaded where CUDA is missing, installed at import."""
from .._core.serialization import install as register_deserialization  # noqa: F401

__all__ = ["register_deserialization"]
