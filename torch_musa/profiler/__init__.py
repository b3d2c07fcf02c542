"""``torch_musa.profiler``: torch.profiler's anti-pattern tools for musa, under torch_musa's path.

* ``BasicEvaluation`` is torch's, which counts musa's launches (torch_musa/gates/profiler.py);
* ``ExtraMUSACopyPattern`` and ``FP32MatMulPattern`` are torch's CUDA patterns speaking of musa (the
  TF32 check asks ``torch.musa.is_tf32_supported()`` instead of CUDA's architecture list);
* ``report_all_anti_patterns`` is torch's report run with those two patterns in place of CUDA's.
"""
import types

import torch

from .. import _version_gate
from .._core import device as _device

if _version_gate.profiler_anti_patterns_available():
    from torch.profiler import _pattern_matcher as _pm
    from torch.profiler._utils import BasicEvaluation  # noqa: F401
    from torch.profiler._pattern_matcher import MatMulDimInFP16Pattern  # noqa: F401  (gates/profiler.py: musa's events)


    class ExtraMUSACopyPattern(_pm.ExtraCUDACopyPattern):
        """A CPU tensor filled and then moved to musa at once (create it on musa instead)."""

        def __init__(self, prof, should_benchmark: bool = False) -> None:
            super().__init__(prof, should_benchmark)
            self.name = "Extra MUSA Copy Pattern"
            self.description = "Filled a CPU tensor and immediately moved it to musa. Please initialize it on musa."


    class FP32MatMulPattern(_pm.FP32MatMulPattern):
        """float32 matmuls on a device with TF32 while TF32 is off."""

        @property
        def skip(self) -> bool:
            return not _device.is_tf32_supported() or _pm.Pattern.skip.fget(self) or not self.prof.record_shapes


    # torch's report body, reading these two classes where it names CUDA's (its code is not copied).
    report_all_anti_patterns = types.FunctionType(
        _pm.report_all_anti_patterns.__code__,
        {**_pm.report_all_anti_patterns.__globals__,
         "ExtraCUDACopyPattern": ExtraMUSACopyPattern, "FP32MatMulPattern": FP32MatMulPattern},
        "report_all_anti_patterns", _pm.report_all_anti_patterns.__defaults__,
    )
    report_all_anti_patterns.__kwdefaults__ = _pm.report_all_anti_patterns.__kwdefaults__
    report_all_anti_patterns.__doc__ = "torch.profiler's TorchTidy report, with musa's copy and TF32 patterns."

    __all__ = ["BasicEvaluation", "ExtraMUSACopyPattern", "FP32MatMulPattern", "MatMulDimInFP16Pattern",
               "report_all_anti_patterns"]
else:
    __all__ = []

    def __getattr__(name):
        if name in ("BasicEvaluation", "ExtraMUSACopyPattern", "FP32MatMulPattern", "MatMulDimInFP16Pattern",
                    "report_all_anti_patterns"):
            raise ImportError(
                f"torch_musa.profiler.{name} adapts torch.profiler's TorchTidy anti-patterns "
                f"(torch.profiler._pattern_matcher, _utils.BasicEvaluation), which torch {torch.__version__} no longer has (removed in 2.15); "
                "use torch 2.14 or older for them"
            )
        raise AttributeError(f"module 'torch_musa.profiler' has no attribute '{name}'")
