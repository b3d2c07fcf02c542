"""torch.load of a checkpoint saved on CUDA, where CUDA is not available: the error says how to
load it onto musa (torch's own says only map_location='cpu'). Registered as a torch.serialization
package ahead of CUDA's, so it only speaks where CUDA's deserializer would fail (a CUDA tag, or
map_location='cuda'); under torch_musa.enable_cuda_compat() / ``python -m torch_musa.run``
(which map CUDA storages to musa), it is never reached."""
import torch

from ..memory import unified as _unified_memory


def _tag(obj):
    return None  # saving is not this package's business


def _deserialize(obj, location):
    if isinstance(location, str) and (location == "musa" or location.startswith("musa:")):
        # Unified memory: a storage read into mapped host memory becomes a musa view of it, no copy.
        return _unified_memory.device_view(obj, location)
    if isinstance(location, str) and location.startswith("cuda") and not torch.cuda.is_available():
        # The first two sentences are torch.cuda's own error with musa named as the way out, as
        # torch_musa users' code matches it.
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. "
            "If you are running on a MUSA enabled machine, please use torch.load with "
            "map_location=torch.device('musa') or map_location=torch.device('cpu') to map your storages "
            f"to the MUSA or CPU. (The storage is tagged {location}: map_location='musa' loads it onto "
            "musa; torch_musa.enable_cuda_compat() or `python -m torch_musa.run` load CUDA checkpoints "
            "onto musa without changes.)"
        )
    return None


def install() -> None:
    # Priority 19: consulted just before CUDA's (20).
    torch.serialization.register_package(19, _tag, _deserialize)
