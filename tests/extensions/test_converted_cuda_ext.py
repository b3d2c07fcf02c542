"""The converter corpus's CUDA extension (.cu + CUDAExtension): after musa-converter
(and renaming kernels.cu to kernels.mu) it builds with MUSAExtension and runs on musa."""
import pytest
import torch


@pytest.fixture
def converted(builds):
    if builds["converted"] is None:
        pytest.skip(builds["converted_skip"])
    return builds["converted"]


def test_converted_sources_use_musa_names(converted):
    d = converted.project
    kernels = (d / "kernels.mu").read_text()
    for musa_name in ("#include <ATen/musa/MUSAContext.h>", "#include <c10/musa/MUSAGuard.h>",
                      "#include <musa_runtime.h>", "c10::musa::MUSAGuard", "musaStream_t stream = at::musa::getCurrentMUSAStream()",
                      "C10_MUSA_KERNEL_LAUNCH_CHECK()", "x.is_privateuseone()"):
        assert musa_name in kernels, musa_name
    assert "cuda" not in kernels.lower()
    setup_py = (d / "setup.py").read_text()
    assert "MUSAExtension" in setup_py and "torch_musa.utils.musa_extension" in setup_py and '"mcc"' in setup_py


def test_converted_cuda_extension_runs_on_musa(converted):
    mod = converted.result()
    torch.manual_seed(0)
    x = torch.randn(33, 100, device="musa")
    b = torch.randn(100, device="musa")
    out = mod.bias_relu(x, b)
    assert out.device.type == "musa"
    torch.testing.assert_close(out, torch.relu(x + b))
    try:
        mod.bias_relu(x.cpu(), b.cpu())
    except RuntimeError as e:
        assert "MUSA" in str(e) or "musa" in str(e).lower()
    else:
        raise AssertionError("a CPU tensor was accepted")
