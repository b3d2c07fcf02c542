"""Run unmodified CUDA PyTorch code on musa: ``enable_cuda_compat()``.

After ``enable_cuda_compat()`` (or under ``python -m torch_musa.run script.py``):

* ``torch.cuda.*`` functions and classes are the ``torch.musa`` ones
  (``is_available()`` is True when musa is), ``torch.cuda.amp`` autocast /
  GradScaler are musa's, ``torch.cuda.nvtx`` calls are accepted and ignored;
* ``"cuda"`` / ``"cuda:N"`` / ``torch.device("cuda")`` / an int ``device=`` given to
  torch functions and tensor methods (factories, ``Tensor.to``, ``Module.to``,
  ``pin_memory`` ...) mean musa; ``Tensor.cuda()`` / ``Module.cuda()`` move to musa;
  ``Tensor.is_cuda`` is True for musa tensors;
* ``torch.autocast("cuda")``, ``torch.amp.GradScaler("cuda")``,
  ``torch.load(..., map_location=...)`` and checkpoints saved on CUDA load on musa;
* ``torch.backends.cuda`` / ``torch.backends.cudnn`` flags are accepted (they
  exist on every torch build; musa kernels do not read them);
* ``torch.distributed`` backend ``"nccl"`` becomes ``"mccl"`` when such a backend
  is registered, otherwise ``"gloo"`` (with a warning: gloo only reduces CPU
  tensors); ``dist.is_nccl_available()`` is True;
* ``CUDA_VISIBLE_DEVICES`` / ``CUDA_LAUNCH_BLOCKING`` are copied to their MUSA_
  names when those are unset.

See docs/tools.md for what is not covered.
"""

from __future__ import annotations

import functools
import os
import re
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from .._core.device import current_device

__all__ = ["enable_cuda_compat", "disable_cuda_compat", "is_cuda_compat_enabled", "translate_device"]

_CUDA_STR = re.compile(r"^cuda(:\d+)?$")
_SENTINEL = object()


def _musa():
    # torch's registered device module is the point: torch.cuda gets torch.musa's names (its __all__).
    # (this module is part of torch_musa: the package imported before it, so only the registration can be missing)
    if not hasattr(torch, "musa"):
        raise RuntimeError("torch_musa is imported but torch.musa is not registered, so another "
                           "PrivateUse1 backend probably claimed the device slot first: import torch_musa "
                           "before other out-of-tree device backends")
    return torch.musa


def translate_device(dev: Any) -> Any:
    """'cuda' -> 'musa', 'cuda:1' -> 'musa:1', torch.device('cuda', 1) -> torch.device('musa', 1).

    Strings stay strings and devices stay devices; anything else is returned unchanged.
    """
    if isinstance(dev, str) and _CUDA_STR.match(dev):
        return "musa" + dev[4:]
    if isinstance(dev, torch.device) and dev.type == "cuda":
        return torch.device("musa", dev.index) if dev.index is not None else torch.device("musa")
    return dev


def _translate_device_kwarg(dev: Any) -> Any:
    # On CUDA an int device means cuda:N; here it means musa:N.
    if isinstance(dev, int) and not isinstance(dev, bool):
        return torch.device("musa", dev)
    return translate_device(dev)


class _CudaToMusaMode(TorchFunctionMode):
    """Rewrites CUDA device arguments of every torch function to musa.

    ``torch.device("cuda")`` itself is left alone, so script logic such as
    ``device.type == "cuda"`` or ``torch.autocast(device.type)`` keeps working;
    the device is translated where it is used.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.device:
            return func(*args, **kwargs)
        if args:
            args = tuple(translate_device(a) for a in args)
        if kwargs:
            kwargs = {
                k: (_translate_device_kwarg(v) if k == "device" else translate_device(v))
                for k, v in kwargs.items()
            }
        return func(*args, **kwargs)


def _device_index(device: Any) -> Optional[int]:
    if device is None:
        return None
    if isinstance(device, int):
        return device
    dev = translate_device(device)
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != "musa":
            raise ValueError(f"Invalid device for .cuda() under cuda compat: {device!r}")
        return dev.index
    raise TypeError(f"Invalid device argument for .cuda(): {device!r}")


def _tensor_cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    idx = _device_index(device)
    target = torch.device("musa", idx) if idx is not None else torch.device("musa", current_device())
    return self.to(target, non_blocking=non_blocking, memory_format=memory_format)


def _module_cuda(self, device=None):
    idx = _device_index(device)
    target = torch.device("musa", idx) if idx is not None else torch.device("musa", current_device())
    return self._apply(lambda t: t.to(target))


def _is_cuda(self) -> bool:
    return self.device.type in ("cuda", "musa")


class _Nvtx:
    """torch.cuda.nvtx stand-in: markers are accepted and ignored."""

    @staticmethod
    def range_push(msg):
        return 0

    @staticmethod
    def range_pop():
        return 0

    @staticmethod
    def range_start(msg):
        return 0

    @staticmethod
    def range_end(range_id):
        return None

    @staticmethod
    def mark(msg):
        return None

    @staticmethod
    def range(msg, *args, **kwargs):
        import contextlib

        return contextlib.nullcontext()


# --------------------------------------------------------------------------
# State: every patch records how to undo itself
# --------------------------------------------------------------------------


class _Patches:
    def __init__(self) -> None:
        self._undo: List[Tuple[Any, str, Any]] = []

    def set(self, obj: Any, name: str, value: Any) -> None:
        old = obj.__dict__.get(name, _SENTINEL) if hasattr(obj, "__dict__") else getattr(obj, name, _SENTINEL)
        self._undo.append((obj, name, old))
        setattr(obj, name, value)

    def undo(self) -> None:
        while self._undo:
            obj, name, old = self._undo.pop()
            if old is _SENTINEL:
                try:
                    delattr(obj, name)
                except AttributeError:
                    pass
            else:
                setattr(obj, name, old)


_STATE: Dict[str, Any] = {}


def is_cuda_compat_enabled() -> bool:
    return bool(_STATE)


# --------------------------------------------------------------------------
# Pieces
# --------------------------------------------------------------------------

_EXTRA_CUDA_NAMES = ("_lazy_init", "OutOfMemoryError", "StreamContext", "get_amp_supported_dtype")


def _translating(fn: Callable) -> Callable:
    """Wrap a torch.musa function so CUDA device arguments are accepted."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args = tuple(translate_device(a) for a in args)
        kwargs = {k: translate_device(v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)

    return wrapper


def _patch_torch_cuda(p: _Patches, musa) -> None:
    import inspect

    import torch.cuda

    names = set(getattr(musa, "__all__", ())) | set(_EXTRA_CUDA_NAMES)
    for name in sorted(names):
        if name == "amp" or not hasattr(musa, name):
            continue
        value = getattr(musa, name)
        if inspect.isfunction(value) or inspect.isbuiltin(value):
            value = _translating(value)
        elif name in ("device", "device_of") and callable(value):
            value = _translating(value)  # context managers taking a device
        p.set(torch.cuda, name, value)
    p.set(torch.cuda, "nvtx", _Nvtx)
    p.set(torch.cuda, "get_arch_list", lambda: [])
    import torch.cuda.amp as cuda_amp

    for name in ("autocast", "GradScaler", "custom_fwd", "custom_bwd"):
        if hasattr(musa.amp, name):
            p.set(cuda_amp, name, getattr(musa.amp, name))


def _patch_tensor_module(p: _Patches) -> None:
    p.set(torch.Tensor, "cuda", _tensor_cuda)
    p.set(torch.Tensor, "is_cuda", property(_is_cuda))
    p.set(torch.nn.Module, "cuda", _module_cuda)


def _translate_device_type(device_type: Any) -> Any:
    return "musa" if device_type == "cuda" else device_type


def _patch_amp(p: _Patches) -> None:
    orig_autocast = torch.amp.autocast_mode.autocast

    class autocast(orig_autocast):  # noqa: N801 - same name as torch's
        def __init__(self, device_type: str, *args: Any, **kwargs: Any) -> None:
            super().__init__(_translate_device_type(device_type), *args, **kwargs)

    autocast.__doc__ = orig_autocast.__doc__
    p.set(torch, "autocast", autocast)
    p.set(torch.amp, "autocast", autocast)

    orig_scaler = torch.amp.GradScaler

    class GradScaler(orig_scaler):
        def __init__(self, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
            super().__init__(_translate_device_type(device), *args, **kwargs)

    p.set(torch.amp, "GradScaler", GradScaler)

    def wrap_device_type(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], str):
                args = (_translate_device_type(args[0]),) + tuple(args[1:])
            if "device_type" in kwargs:
                kwargs["device_type"] = _translate_device_type(kwargs["device_type"])
            return fn(*args, **kwargs)

        return wrapper

    for name in ("is_autocast_enabled", "get_autocast_dtype", "set_autocast_enabled", "set_autocast_dtype"):
        if hasattr(torch, name):
            p.set(torch, name, wrap_device_type(getattr(torch, name)))
    for name in ("custom_fwd", "custom_bwd"):
        if hasattr(torch.amp, name):
            p.set(torch.amp, name, wrap_device_type(getattr(torch.amp, name)))


def _translate_map_location(loc: Any) -> Any:
    if loc is None:
        def restore(storage, location):
            if isinstance(location, str) and location.startswith("cuda"):
                return storage.to(device=torch.device("musa" + location[4:]))
            return None

        return restore
    if isinstance(loc, dict):
        return {k: translate_device(v) if isinstance(v, str) else v for k, v in loc.items()} | {
            k.replace("cuda", "musa", 1): translate_device(v)
            for k, v in loc.items()
            if isinstance(k, str) and k.startswith("cuda")
        }
    if isinstance(loc, (str, torch.device)):
        return translate_device(loc)
    if callable(loc):
        def call(storage, location):
            res = loc(storage, location)
            if isinstance(res, (str, torch.device)):
                return storage.to(device=torch.device(translate_device(res)))
            return res

        return call
    return loc


def _patch_load(p: _Patches) -> None:
    orig_load = torch.load

    @functools.wraps(orig_load)
    def load(f, map_location=None, *args: Any, **kwargs: Any):
        return orig_load(f, _translate_map_location(map_location), *args, **kwargs)

    p.set(torch, "load", load)


def translate_backend(backend: Any) -> Any:
    """Map a torch.distributed backend spec: nccl -> mccl if registered, else gloo."""
    import torch.distributed as dist

    if not isinstance(backend, str):
        return backend
    has_mccl = "mccl" in getattr(dist.Backend, "backend_list", [])
    target = "mccl" if has_mccl else "gloo"
    if "nccl" not in backend.lower():
        return backend
    if not has_mccl:
        warnings.warn(
            "cuda compat: no 'mccl' torch.distributed backend is registered; backend 'nccl' is mapped to "
            "'gloo', which only runs collectives on CPU tensors",
            RuntimeWarning,
            stacklevel=3,
        )
    if ":" not in backend:
        return target
    parts = []
    for item in backend.split(","):
        dev, _, name = item.partition(":")
        dev, name = dev.strip(), name.strip()
        if name.lower() == "nccl":
            if target == "gloo":
                continue  # gloo is already (or will be) the cpu backend
            name = target
        parts.append(f"{'musa' if dev == 'cuda' else dev}:{name}")
    spec = ",".join(parts)
    if target == "gloo" and "cpu:" not in spec:
        spec = ",".join([spec, "cpu:gloo"]) if spec else "gloo"
    return spec


def _patch_distributed(p: _Patches) -> None:
    import torch.distributed as dist

    if not dist.is_available():
        return

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if args:
                args = (translate_backend(args[0]),) + tuple(args[1:])
            if "backend" in kwargs:
                kwargs["backend"] = translate_backend(kwargs["backend"])
            return fn(*args, **kwargs)

        return wrapper

    p.set(dist, "init_process_group", wrap(dist.init_process_group))
    if hasattr(dist, "distributed_c10d"):
        p.set(dist.distributed_c10d, "init_process_group", dist.init_process_group)

    orig_new_group = dist.new_group

    @functools.wraps(orig_new_group)
    def new_group(*args: Any, **kwargs: Any):
        if "backend" in kwargs:
            kwargs["backend"] = translate_backend(kwargs["backend"])
        if len(args) >= 3:
            args = args[:2] + (translate_backend(args[2]),) + tuple(args[3:])
        return orig_new_group(*args, **kwargs)

    p.set(dist, "new_group", new_group)
    p.set(dist, "is_nccl_available", lambda: True)


def _copy_env() -> Dict[str, Optional[str]]:
    changed = {}
    for cuda_name, musa_name in (
        ("CUDA_VISIBLE_DEVICES", "MUSA_VISIBLE_DEVICES"),
        ("CUDA_LAUNCH_BLOCKING", "MUSA_LAUNCH_BLOCKING"),
    ):
        if cuda_name in os.environ and musa_name not in os.environ:
            changed[musa_name] = None
            os.environ[musa_name] = os.environ[cuda_name]
    return changed


# --------------------------------------------------------------------------
# Public switch
# --------------------------------------------------------------------------


def enable_cuda_compat() -> None:
    """Serve CUDA-flavoured PyTorch calls with musa, process-wide. Idempotent.

    The device-string translation is a TorchFunctionMode entered on the calling
    thread (call this from the main thread, before creating other threads that
    build tensors from "cuda" strings).
    """
    if _STATE:
        return
    musa = _musa()
    p = _Patches()
    try:
        env = _copy_env()
        _patch_torch_cuda(p, musa)
        _patch_tensor_module(p)
        _patch_amp(p)
        _patch_load(p)
        _patch_distributed(p)
        mode = _CudaToMusaMode()
        mode.__enter__()
    except BaseException:
        p.undo()
        raise
    _STATE.update(patches=p, mode=mode, env=env)


def disable_cuda_compat() -> None:
    """Undo :func:`enable_cuda_compat` (must run on the thread that enabled it)."""
    if not _STATE:
        return
    mode = _STATE["mode"]
    try:
        mode.__exit__(None, None, None)
    finally:
        _STATE["patches"].undo()
        for name in _STATE["env"]:
            os.environ.pop(name, None)
        _STATE.clear()
