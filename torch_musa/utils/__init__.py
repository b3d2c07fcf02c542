"""Porting and accuracy tools for torch_musa (see docs/tools.md).

* :mod:`torch_musa.utils.cuda_compat` -- ``enable_cuda_compat()``: unmodified CUDA code on musa
  (public path ``torch_musa.cuda_compat``; ``python -m torch_musa.run`` runs a script under it)
* :mod:`torch_musa.utils.compare_tool` -- CompareWithCPU, NanInfTracker, open_module_tracker
* :mod:`torch_musa.utils.musa_converter` -- the ``musa-converter`` source rewriter
* :mod:`torch_musa.utils.musa_extension` -- C++ extension building for musa

Submodules are imported on demand so ``import torch_musa`` stays cheap.
"""
