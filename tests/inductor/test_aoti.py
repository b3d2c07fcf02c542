"""AOTInductor on musa: an exported musa model compiles into a .pt2 package that runs on musa,
from Python (torch._inductor.aoti_load_package) and from C++ (AOTIModelPackageLoader), with the
eager results, for any batch size the export allowed.

One package (dynamic batch) serves all tests: AOT compiles are slow on CI's two cores.
"""
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch
from torch import nn

FEATURES = 8
EXPORT_BATCH = 3


class _Net(nn.Module):
    """Matmuls (extern kernels), fused pointwise work, a buffer and two outputs."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 16)
        self.fc2 = nn.Linear(16, 4)
        self.register_buffer("shift", torch.linspace(-1, 1, 4))

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x))
        y = self.fc2(h) + self.shift
        return y, y.softmax(-1).sum(0)


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return _Net().to("musa").eval()


@pytest.fixture(scope="module")
def package(net, tmp_path_factory):
    x = torch.randn(EXPORT_BATCH, FEATURES, device="musa")
    batch = torch.export.Dim("batch", min=1, max=64)
    ep = torch.export.export(net, (x,), dynamic_shapes=({0: batch},))
    path = tmp_path_factory.mktemp("aoti") / "net.pt2"
    return torch._inductor.aoti_compile_and_package(ep, package_path=str(path))


def _eager(net, x):
    with torch.no_grad():
        return net(x)


def test_package_runs_on_musa_with_eager_results(net, package):
    compiled = torch._inductor.aoti_load_package(package)
    x = torch.randn(EXPORT_BATCH, FEATURES, device="musa")
    out = compiled(x)
    expected = _eager(net, x)
    assert len(out) == len(expected)
    for got, want in zip(out, expected):
        assert got.device == x.device
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # A second run gets fresh outputs: the first run's results stay as they were.
    first = out[0].clone()
    compiled(torch.randn(EXPORT_BATCH, FEATURES, device="musa"))
    torch.testing.assert_close(out[0], first, rtol=0, atol=0)


@pytest.mark.parametrize("batch", [1, 17])
def test_dynamic_batch(net, package, batch):
    compiled = torch._inductor.aoti_load_package(package)
    x = torch.randn(batch, FEATURES, device="musa")
    got, want = compiled(x), _eager(net, x)
    assert got[0].shape == (batch, 4)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def _libpython():
    libdir, name = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY") or ""
    return (libdir, name) if libdir and name.endswith(".so") and os.path.exists(os.path.join(libdir, name)) else None


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the C++ program")
def test_cpp_program_runs_the_package(net, package, tmp_path):
    import torch_musa
    from torch.utils import cpp_extension

    # The program loads torch_musa's native library, which links libtorch_python: it needs libpython.
    py = _libpython()
    if py is None:
        pytest.skip("this Python has no shared libpython for a C++ program to link")
    source = Path(__file__).with_name("aoti_package_main.cpp")
    exe = tmp_path / "aoti_package_main"
    torch_lib = cpp_extension.library_paths()[0]
    cmd = ["g++", "-std=c++20", "-O1", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
           *[f"-I{p}" for p in cpp_extension.include_paths()], str(source), "-o", str(exe),
           "-Wl,--no-as-needed", f"-L{torch_lib}", f"-Wl,-rpath,{torch_lib}", "-ltorch", "-ltorch_cpu", "-lc10",
           f"-L{py[0]}", f"-Wl,-rpath,{py[0]}", f"-l:{py[1]}", "-ldl"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)

    batch = 5
    run = subprocess.run([str(exe), package, torch_musa._C.__file__, str(batch), str(FEATURES)],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert run.returncode == 0, run.stderr[-3000:]
    x = (torch.arange(batch * FEATURES, dtype=torch.float32) / 100).reshape(batch, FEATURES).to("musa")
    expected = _eager(net, x)
    # The program prints "device <d>" and then the values of each output.
    blocks = run.stdout.split("device ")[1:]
    assert len(blocks) == len(expected)
    for block, want in zip(blocks, expected):
        device, *values = block.split()
        assert device == "musa:0"
        got = torch.tensor([float(v) for v in values], dtype=torch.float64).reshape(want.shape)
        torch.testing.assert_close(got, want.cpu().double(), rtol=1e-5, atol=1e-5)


def test_cpp_wrapper_compile_matches_eager(device):
    # torch.compile's C++ wrapper mode is the same code generation without a package.
    def f(x, w):
        return (x @ w).relu() + x.sum()

    torch._dynamo.reset()
    x, w = torch.randn(6, 5, device=device), torch.randn(5, 3, device=device)
    out = torch.compile(f, options={"cpp_wrapper": True})(x, w)
    assert out.device == device
    torch.testing.assert_close(out, f(x, w), rtol=1e-5, atol=1e-5)


def test_buffers_the_model_mutates(device):
    # Train-mode batch norm updates its running stats: Inductor packages their initial values.
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6)).to(device).train()
    x = torch.randn(8, 4, device=device)
    path = torch._inductor.aoti_compile_and_package(torch.export.export(net, (x,)))
    out = torch._inductor.aoti_load_package(path)(x)
    assert out.device == device
    torch.testing.assert_close(out, net(x), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(torch.musa.get_driver_name() != "cuda", reason="flash attention through the overrideable "
                    "backend is the cuda driver's choice (the host keeps the CPU's variant)")
def test_package_with_flash_attention(tmp_path):
    # AOTInductor's model is a CUDA model: the overrideable attention op musa's SDPA chooses
    # becomes CUDA's flash attention there.
    class Attend(nn.Module):
        def forward(self, q, k, v):
            return nn.functional.scaled_dot_product_attention(q * 2, k, v, is_causal=True)

    q, k, v = (torch.randn(2, 4, 32, 16, device="musa", dtype=torch.float16) for _ in range(3))
    ep = torch.export.export(Attend(), (q, k, v))
    path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "attend.pt2"))
    got = torch._inductor.aoti_load_package(path)(q, k, v)
    torch.testing.assert_close(got, Attend()(q, k, v), rtol=2e-3, atol=2e-3)


# --- torch_musa's loader names (torch_musa._inductor.package.load_package, torch_musa._export.aot_load) ---

def test_torch_musa_load_package_runs_the_package(net, package):
    from torch_musa._inductor.package import load_package

    x = torch.randn(EXPORT_BATCH, FEATURES, device="musa")
    for got, want in zip(load_package(package, "musa")(x), _eager(net, x)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="for 'musa' or 'cpu', not 'meta'"):
        load_package(package, "meta")


def test_aot_compile_outputs_load_with_torch_musas_loaders(net):
    from torch._inductor import config

    from torch_musa._export import aot_load
    from torch_musa._inductor.package import load_package

    x = torch.randn(EXPORT_BATCH, FEATURES, device="musa")
    gm = torch.export.export(net, (x,)).module()
    with config.patch({"aot_inductor.package": True}):  # the files to package, the library among them
        files = torch._inductor.aot_compile(gm, (x,))
    library = next(f for f in files if f.endswith(".so"))
    expected = _eager(net, x)
    for model in (aot_load(library, "musa"), load_package(files, "musa:0")):
        out = model(x)
        assert len(out) == len(expected) and out[0].device == x.device
        for got, want in zip(out, expected):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="not a package: load it with torch_musa._export.aot_load"):
        load_package(library, "musa")
