"""Build errors: the compiler's message and the file for a bad kernel source; the
emulation's own errors before any compiler runs; and the mcc front end."""
import ctypes
import os
import re
import subprocess
import sys

import pytest
import torch

from torch_musa.utils.musa_extension import MusaSourceError, load, target


@pytest.fixture
def musa(builds):
    """torch.musa; asks for `builds` so the session's background builds overlap these tests."""
    return torch.musa


def test_compiler_errors_name_the_file_and_line(musa, tmp_path):
    src = tmp_path / "bad_kernel.mu"
    src.write_text("#include <musa_runtime.h>\n\n__global__ void k(float* x) { x[0] = undefined_name_42; }\n")
    with pytest.raises(RuntimeError, match=r"Error building extension") as info:
        load("musa_bad_kernel", [str(src)], build_directory=str(tmp_path), is_python_module=False)
    msg = str(info.value)
    assert re.search(r"bad_kernel\.mu[:(]3", msg) and "undefined_name_42" in msg  # gcc: file:3, nvcc: file(3)


def test_unsupported_construct_fails_before_compiling(musa, tmp_path):
    if target() != "host":
        pytest.skip("warp match operations compile for the GPU")
    src = tmp_path / "match.mu"
    src.write_text("__global__ void k(unsigned* x) {\n  x[0] = __match_any_sync(0xffffffffu, x[0]);\n}\n")
    with pytest.raises(MusaSourceError, match=r"match\.mu:2: `__match_any_sync` \(a warp match operation\)"):
        load("musa_match_kernel", [str(src)], build_directory=str(tmp_path), is_python_module=False)
    assert not list(tmp_path.glob("*.o"))


MCC_KERNEL = r"""
#include <musa_runtime.h>
__global__ void iota(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i;
}
extern "C" int launch_iota(int* out, int n) {
  iota<<<(n + 127) / 128, 128>>>(out, n);
  musaError_t err = musaGetLastError();
  if (err == musaSuccess) err = musaDeviceSynchronize();
  return static_cast<int>(err);
}
"""


def test_mcc_compiles_and_links_a_kernel_library(musa, tmp_path):
    (tmp_path / "iota.mu").write_text(MCC_KERNEL)
    env = dict(os.environ, TORCH_MUSA_EXT_TARGET=target())
    mcc = [sys.executable, "-m", "torch_musa.utils.musa_extension.mcc"]
    for args in (["-O2", "-c", "iota.mu", "-o", "iota.o", "-Xcompiler", "-fPIC"], ["-shared", "iota.o", "-o", "libiota.so"]):
        res = subprocess.run(mcc + args, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr
    lib = ctypes.CDLL(str(tmp_path / "libiota.so"))
    out = torch.zeros(1000, dtype=torch.int32, device="musa")
    torch.musa.synchronize()
    assert lib.launch_iota(ctypes.c_void_p(out.data_ptr()), 1000) == 0
    assert torch.equal(out.cpu(), torch.arange(1000, dtype=torch.int32) * 3)
