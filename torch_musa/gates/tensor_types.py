"""Tensor.type's legacy type names (torch 2.11-2.15): torch parses names by backend prefix
("torch.musa.FloatTensor"); torch_musa programs also name the same classes by the package
("torch_musa.FloatTensor"). Only such names are rewritten."""
import functools

from .registry import gate

_PREFIX = "torch_musa."


def _torch_name(name):
    if isinstance(name, str) and name.startswith(_PREFIX):
        return "torch.musa." + name[len(_PREFIX):]
    return name


@gate("torch", "Tensor.type", "parses type names by backend prefix; \"torch_musa.FloatTensor\" (torch_musa's "
      "name for torch.musa.FloatTensor) is read as torch.musa's")
def _wrap_tensor_type(torch_fn):
    @functools.wraps(torch_fn)
    def type(self, *args, **kwargs):
        if args:
            args = (_torch_name(args[0]),) + args[1:]
        elif "dtype" in kwargs:
            kwargs["dtype"] = _torch_name(kwargs["dtype"])
        return torch_fn(self, *args, **kwargs)

    return type
