"""Making musa a torch device: the process-wide setup ``import torch_musa`` runs, in order.

Two phases, because the package's submodules sit between them:

* ``prepare()`` runs before any submodule is imported: they load the native extension and
  some build ``torch.device("musa")`` at import (``_inductor/devices.py``), which needs the
  PrivateUse1 backend already named "musa".
* ``install(package)`` runs once the package has assembled its public names; ``package`` is
  the ``torch_musa`` module object, which torch registers as ``torch.musa`` (passed in: no
  module of the package imports its root).

The package root only assembles names; every step that changes torch or the process is here.
"""
import torch

from .. import _version_gate


def _promote_libstdcxx() -> None:
    """Puts libstdc++ in the global symbol scope before the extension loads.

    Python loads extensions with RTLD_LOCAL, so weak copies of libstdc++
    template statics (a locale facet's id, used when an error message formats
    a number) that a compiler emits into our libraries would otherwise bind to
    those private copies instead of libstdc++'s: the facet lookup then fails
    and the process crashes (seen on the GPU machine's toolchain).
    """
    import ctypes

    try:
        ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
    except OSError:  # not a glibc/libstdc++ system: nothing to promote
        pass


def _claim_privateuse1() -> None:
    name = torch._C._get_privateuse1_backend_name()
    if name in ("privateuseone", "privateuse1"):
        torch.utils.rename_privateuse1_backend("musa")
    elif name != "musa":
        raise ImportError(
            f"the PrivateUse1 backend is already registered as '{name}'; "
            "torch_musa cannot share a process with another PrivateUse1 backend"
        )


def prepare() -> None:
    """Checks the torch version, loads the native extension and names PrivateUse1 "musa"."""
    _version_gate.check()
    _version_gate.check_build()
    _promote_libstdcxx()
    try:
        from .. import _C
    except ImportError as e:  # pragma: no cover - exercised only on broken installs
        raise ImportError(
            f"torch_musa's native extension failed to load ({e}). It must be built against the installed "
            f"torch {torch.__version__}: run `pip install --no-build-isolation -e .` in the torch_musa source tree."
        ) from e
    _claim_privateuse1()
    if not hasattr(torch.version, "musa"):  # the MUSA runtime API level, as torch_musa writes it ("4030")
        torch.version.musa = str(_C._runtime_version())


def install(package) -> None:
    """Hooks musa into torch and registers ``package`` as ``torch.musa``; called once, last."""
    from . import autograd_threads, serialization
    from .. import _import_hooks, _inductor, distributed, gates
    from ..amp import torchvision_ops
    from ..backends import mudnn, musa as backends_musa
    from ..graphs import dynamo_backend
    from ..ipc import reducers
    from ..memory import unified

    mudnn._install()  # torch.backends.mudnn
    backends_musa._install()  # torch.backends.musa.matmul
    _import_hooks.after_import("torchvision", torchvision_ops.register)  # autocast for torchvision's ops
    reducers.install()  # musa tensors sent to another process share their memory (IPC)
    serialization.install()  # CUDA checkpoints without CUDA: the error names map_location='musa'
    unified.install()  # PYTORCH_MUSA_ALLOC_CONF=cpu:unified: CPU tensors in memory musa addresses
    gates.install_all()  # torch Python functions that hard-code CUDA, wrapped for musa arguments (gates/registry.py)

    torch._register_device_module("musa", package)
    # (torch.musa.profiler loads on first use, after the registration: torch.profiler's pattern
    # matcher imports torch.utils.benchmark, which asks torch.accelerator about the device at
    # import, on torch 2.11.)

    distributed._register()
    autograd_threads.install()  # autograd's device threads drop their last backward before Python finalizes
    dynamo_backend._install_lazy_registration()  # backend="musagraphs" once torch._dynamo loads
    _inductor.install()  # the musa device interface once torch._dynamo loads
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
