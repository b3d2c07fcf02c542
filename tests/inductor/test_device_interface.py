"""Dynamo's view of musa: the device interface, and torch.musa stream calls traced like torch.cuda's."""
import torch
from torch._dynamo.testing import CompileCounter


def test_interface_registered_for_musa_and_each_index():
    from torch._dynamo.device_interface import get_interface_for_device

    iface = get_interface_for_device("musa")
    assert iface is get_interface_for_device(torch.device("musa", 0))
    for i in range(torch.musa.device_count()):
        assert get_interface_for_device(f"musa:{i}") is iface
    assert iface.device_count() == torch.musa.device_count()
    assert iface.current_device() == torch.musa.current_device()
    assert iface.Stream is torch.musa.Stream and iface.Event is torch.musa.Event
    assert iface.is_available()
    # Inductor's compile workers read properties without the runtime; values match the parent's.
    props = iface.Worker.get_device_properties("musa:0")
    assert props.multi_processor_count == iface.get_device_properties(0).multi_processor_count
    # Triton only on the GPU; the host driver compiles C++.
    assert iface.is_triton_capable() == (torch.musa.get_driver_name() == "cuda")


def test_raw_stream_follows_the_current_musa_stream():
    from torch._dynamo.device_interface import get_interface_for_device

    iface = get_interface_for_device("musa")
    default = iface.get_raw_stream(0)
    s = torch.musa.Stream()
    with torch.musa.stream(s):
        inside = iface.get_raw_stream(0)
    assert inside != default
    assert iface.get_raw_stream(0) == default


def test_exchange_device_matches_torch_cuda_semantics():
    from torch._dynamo.device_interface import DeviceGuard, get_interface_for_device

    iface = get_interface_for_device("musa")
    assert iface.exchange_device(-1) == -1
    last = torch.musa.device_count() - 1
    with DeviceGuard(iface, last):
        assert torch.musa.current_device() == last
    assert torch.musa.current_device() == 0


def test_stream_calls_trace_without_graph_breaks(device):
    side = torch.musa.Stream()

    def f(x):
        s = torch.musa.current_stream()
        y = x * 2
        with torch.musa.stream(side):
            z = y + 1
        s.wait_stream(side)
        return z, s

    cnt = CompileCounter()
    x = torch.randn(8, device=device)
    z, s = torch.compile(f, backend=cnt, fullgraph=True)(x)
    assert cnt.frame_count == 1
    torch.testing.assert_close(z, x * 2 + 1)
    assert s == torch.musa.current_stream()


def test_interface_takes_the_kernel_device_graph_cuda_device_only_on_the_cuda_driver():
    import pytest
    from torch._dynamo.device_interface import get_interface_for_device

    iface = get_interface_for_device("musa")
    with iface.device(torch.device("musa", 0)):
        assert torch.musa.current_device() == 0
    if torch.musa.get_driver_name() == "cuda":
        # Inductor's fusion benchmarks name the CUDA device of a musa graph compiled as CUDA's
        with iface.device(torch.device("cuda", 0)):
            assert torch.cuda.current_device() == 0
        assert iface.get_device_properties("cuda:0").name == torch.cuda.get_device_properties(0).name
    else:
        with pytest.raises(ValueError, match="Expected a musa device"):
            iface.device(torch.device("cuda", 0))
    # torch.musa's own calls refuse a CUDA device on either driver, as torch.cuda refuses musa
    with pytest.raises(ValueError, match="Expected a musa device"):
        torch.musa.device(torch.device("cuda", 0))


def test_max_autotune_matmul_relu_matches_eager(device):
    # on the cuda driver: Triton GEMM templates autotuned, and fusion benchmarks, on musa memory
    a, b = torch.randn(128, 128, device=device), torch.randn(128, 128, device=device)
    for mode in ("max-autotune-no-cudagraphs", "max-autotune"):
        torch._dynamo.reset()
        out = torch.compile(lambda x, y: torch.relu(x @ y), mode=mode)(a, b)
        assert out.device.type == "musa"
        torch.testing.assert_close(out.cpu(), torch.relu(a.cpu() @ b.cpu()), rtol=1e-3, atol=1e-3)
    torch._dynamo.reset()
