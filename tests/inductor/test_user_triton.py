"""User Triton kernels on musa tensors: launched on the current musa stream (cuda driver), with
torch.library.triton_op in eager and under torch.compile; on the host driver, a clear error."""
import importlib.util
import textwrap

import pytest
import torch

_ON_GPU = torch.musa.get_driver_name() == "cuda" and importlib.util.find_spec("triton") is not None
gpu_only = pytest.mark.skipif(not _ON_GPU, reason="user Triton kernels need the cuda driver and triton")

# A stand-in for the triton package (not installed on CPU machines) with Triton's launch entry
# points, JITFunction.run (``kernel[grid](...)``) and Autotuner.run, which torch_musa wraps when
# they load. Its "kernel" adds x and y into out on CPU tensors: the calls torch_musa must leave
# alone are checked by their result. (torch._dynamo is never imported here: it would take the
# stand-in for all of Triton.)
_FAKE_TRITON = {
    "triton/__init__.py": "",
    "triton/runtime/__init__.py": "",
    "triton/runtime/jit.py": """
        class KernelInterface:
            def __getitem__(self, grid):
                return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

        class JITFunction(KernelInterface):
            def run(self, x, y, out, *args, grid, warmup, **kwargs):
                out.copy_(x + y)
        """,
    "triton/runtime/autotuner.py": """
        from .jit import KernelInterface

        class Autotuner(KernelInterface):
            def __init__(self, fn):
                self.fn = fn

            def run(self, *args, **kwargs):
                return self.fn.run(*args, **kwargs)
        """,
}


def test_host_driver_names_the_cuda_driver_and_leaves_cpu_launches(tmp_path, run_py):
    for path, text in _FAKE_TRITON.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(textwrap.dedent(text))
    r = run_py("""
        import sys
        import torch, torch_musa
        from triton.runtime.autotuner import Autotuner
        from triton.runtime.jit import JITFunction

        kernel = JITFunction()
        x, y = torch.randn(5), torch.randn(5)
        # Other devices: the launches are Triton's own (the stand-in adds on CPU).
        for launcher in (kernel, Autotuner(kernel)):
            out = torch.empty(5)
            launcher[(1,)](x, y, out, 5, BLOCK=8)
            torch.testing.assert_close(out, x + y)
        # musa tensors on the host driver: the error says what Triton needs.
        for launcher in (kernel, Autotuner(kernel)):
            out = torch.empty(5, device="musa")
            try:
                launcher[(1,)](x.musa(), y.musa(), out, 5, BLOCK=8)
            except RuntimeError as e:
                assert "TORCH_MUSA_DRIVER=cuda" in str(e) and "host driver" in str(e), e
            else:
                raise AssertionError("a Triton launch with musa tensors ran on the host driver")
        assert "torch._dynamo" not in sys.modules
        print("ok")
        """, env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


if _ON_GPU:
    import triton
    import triton.language as tl

    @triton.jit
    def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    def _launch(x, y, out):
        _add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)

    @torch.library.triton_op("musa_user_triton::add", mutates_args=())
    def _add_op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        torch.library.wrap_triton(_add_kernel)[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out


@gpu_only
def test_jit_kernel_on_musa_tensors_equals_torch(device):
    x, y = torch.randn(5000, device=device), torch.randn(5000, device=device)
    out = torch.empty_like(x)
    _launch(x, y, out)
    torch.testing.assert_close(out.cpu(), x.cpu() + y.cpu())


@gpu_only
def test_launch_is_ordered_on_the_current_musa_stream(device):
    """On a side stream: inputs written there after a long spin, the kernel's result read after
    s.synchronize() only. On any other stream the kernel would read the inputs before they are written."""
    s = torch.musa.Stream()
    n = 1 << 20
    # Built before the timed part: a first launch compiles for seconds, long enough to hide any order.
    _launch(*(torch.zeros(n, device=device) for _ in range(3)))
    torch.musa.synchronize()
    with torch.musa.stream(s):
        x, y, out = (torch.zeros(n, device=device) for _ in range(3))
        torch.musa._sleep(50_000_000)  # ~25 ms on the H200: the inputs' fill waits behind it
        x.fill_(1.0)
        y.fill_(2.0)
        _launch(x, y, out)
    s.synchronize()
    assert torch.equal(out.cpu(), torch.full((n,), 3.0))
    # The default stream as well: after a spin there, with no synchronization but the read's.
    a, b, c = (torch.zeros(n, device=device) for _ in range(3))
    torch.musa._sleep(50_000_000)
    a.fill_(4.0)
    _launch(a, b, c)
    assert torch.equal(c.cpu(), torch.full((n,), 4.0))


@gpu_only
def test_triton_op_eager_and_compiled_equal(device):
    x, y = torch.randn(3000, device=device), torch.randn(3000, device=device)
    eager = _add_op(x, y)
    torch.testing.assert_close(eager.cpu(), x.cpu() + y.cpu())

    def f(a, b):
        return _add_op(a, b).relu() * 2

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)(x, y)
    torch.testing.assert_close(compiled.cpu(), f(x, y).cpu())
    torch._dynamo.reset()
