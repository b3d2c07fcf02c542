"""The legacy typed-tensor constructors on torch.musa (``torch.musa.FloatTensor(2, 3)``,
``torch.musa.LongTensor([1, 2])``, ``isinstance(t, torch.musa.HalfTensor)``), as torch.cuda has them."""
import torch

from .device import current_device

_DTYPES = {
    "FloatTensor": torch.float32, "DoubleTensor": torch.float64, "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16, "ByteTensor": torch.uint8, "CharTensor": torch.int8,
    "ShortTensor": torch.int16, "IntTensor": torch.int32, "LongTensor": torch.int64, "BoolTensor": torch.bool,
}


class _LegacyTensorType(type):
    """isinstance(t, torch.musa.FloatTensor): a musa tensor of that dtype."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Tensor) and obj.device.type == "musa" and obj.dtype == cls.dtype

    def __repr__(cls):
        return f"<class '{cls.__name__}'>"


def _make(name, dtype):
    cpu_ctor = getattr(torch, name)

    def __new__(cls, *args, device=None):
        # The CPU constructor's rules (sizes, a sequence, a tensor of that dtype), placed on musa.
        return cpu_ctor(*args).to(torch.device("musa", current_device() if device is None else device))

    cls = _LegacyTensorType(name, (), {"dtype": dtype, "__new__": __new__, "__module__": "torch.musa"})
    # Tensor.type(cls) reads the class's C-level name (tp_name), which for torch.cuda's
    # classes is the full "torch.cuda.ByteTensor"; the full name lets it parse ours the same way.
    cls.__name__ = f"torch.musa.{name}"
    return cls


TYPES = {name: _make(name, dtype) for name, dtype in _DTYPES.items()}
