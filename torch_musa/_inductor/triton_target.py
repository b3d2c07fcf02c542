"""The Triton target for musa kernels on the cuda driver (autotuning's benchmark builds).

Inductor names a kernel's Triton target after the tensor's device type, so musa
kernels ask Triton for a ``musa`` target. On the cuda driver musa memory is CUDA
memory and musa streams are CUDA streams, so a musa target is the NVIDIA target:
this registers, in Triton's own backend registry, a backend that accepts ``musa``
targets and compiles them with Triton's NVIDIA compiler. Its driver is never the
active one (Triton launches through the CUDA driver, as for cuda tensors).
"""
from __future__ import annotations

_NAME = "musa"


def register(_triton=None) -> None:
    from triton.backends import Backend, backends
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.backends.nvidia.driver import CudaDriver

    if _NAME in backends or "nvidia" not in backends:
        return

    class MusaOnCudaBackend(CUDABackend):
        @staticmethod
        def supports_target(target) -> bool:
            return target.backend == _NAME

        def __init__(self, target) -> None:
            super().__init__(target)
            self.target = GPUTarget("cuda", target.arch, target.warp_size)

        def hash(self) -> str:
            # Triton's cache keeps the target a kernel was built for: musa-target builds must
            # not answer a native process's lookups for the same source (it has no musa backend).
            return f"{_NAME}-{super().hash()}"

    class InactiveCudaDriver(CudaDriver):
        @staticmethod
        def is_active() -> bool:
            return False  # the nvidia backend's driver launches musa kernels too

    backends[_NAME] = Backend(compiler=MusaOnCudaBackend, driver=InactiveCudaDriver)
