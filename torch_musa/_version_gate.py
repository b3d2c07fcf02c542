"""The one place Python-side torch-version differences are decided."""
import torch

SUPPORTED = ((2, 11), (2, 12), (2, 13))


def torch_version():
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def check():
    """Raises ImportError naming the supported versions when torch is not one of them."""
    version = torch_version()
    if version not in SUPPORTED:
        names = ", ".join(f"{a}.{b}" for a, b in SUPPORTED)
        raise ImportError(
            f"torch_musa supports torch {names}; the installed torch is {torch.__version__}. "
            f"Install a supported torch (e.g. pip install torch==2.13.0) and rebuild torch_musa."
        )
    return version
