"""``torch.device("musa", i)``, built once: generated wrapper code names musa devices through
these (see wrapper.py). Device objects check no index, so this needs no runtime at import."""
import torch

DEVICES = tuple(torch.device("musa", i) for i in range(64))
