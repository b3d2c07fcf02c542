"""torch.cuda API that torch_musa programs use, on torch.musa with torch.cuda's contract: device
queries, stream handles and priorities, Event.device, _sleep, the legacy typed-tensor
constructors, torch.backends.mudnn and the memory-fraction argument checks."""
import time

import pytest
import torch


def test_peer_access_and_its_argument_checks(two_devices):
    assert torch.musa.can_device_access_peer(0, 1) in (True, False)
    if torch.musa.get_driver_name() == "host":  # emulated devices share the host's memory
        assert torch.musa.can_device_access_peer(0, 1) and not torch.musa.can_device_access_peer(0, 0)
    with pytest.raises(AssertionError, match="Invalid peer device id"):
        torch.musa.can_device_access_peer(0, torch.musa.device_count())
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.musa.can_device_access_peer(-2, 0)


def test_tf32_and_bf16_support_answer_as_torch_musa_does(device):
    if torch.musa.get_driver_name() == "host":
        # torch_musa's answer for the capability the host driver reports (3.1 >= 2.2, its first
        # architecture with native bfloat16 and TF32)
        assert torch.musa.get_device_capability() == (3, 1)
        assert torch.musa.is_tf32_supported() is True
        assert torch.musa.is_bf16_supported() is True
        assert torch.musa.is_bf16_supported(including_emulation=False) is True
    else:  # the GPU's answer, as torch.cuda gives it (Ampere and newer)
        ordinal = torch.musa._C._driver_ordinal(0)
        assert torch.musa.is_tf32_supported() is (torch.cuda.get_device_properties(ordinal).major >= 8)


def test_stream_priority_range_and_raw_handle(device):
    least, greatest = torch.musa.Stream.priority_range()
    assert least == 0 and greatest < 0  # CUDA's shape: 0 normal, negative higher
    s = torch.musa.Stream(priority=greatest)
    # the highest pool's priority: as torch.cuda, a priority past the pools' range is clamped to it
    assert greatest <= s.priority < 0
    assert torch.musa.Stream(priority=-1).priority == -1
    h1, h2 = s.musa_stream, torch.musa.default_stream().musa_stream
    assert isinstance(h1, int) and h1 != 0 and h1 != h2
    assert torch.musa.Stream(stream_id=s.stream_id, device_index=s.device_index,
                             device_type=s.device_type).musa_stream == h1  # the same stream, the same handle


def test_event_device_is_none_until_recorded(device):
    e = torch.musa.Event()
    assert e.device is None
    e.record()
    assert e.device == torch.device("musa", 0)


def test_sleep_holds_the_stream(device):
    torch.musa.synchronize()
    t0 = time.perf_counter()
    torch.musa._sleep(50_000_000)  # ~50 ms at 1 GHz
    torch.musa.synchronize()
    assert time.perf_counter() - t0 >= 0.01
    with pytest.raises(ValueError, match="non-negative int"):
        torch.musa._sleep(-1)


@pytest.mark.parametrize("name,dtype", [("FloatTensor", torch.float32), ("HalfTensor", torch.float16),
                                        ("ByteTensor", torch.uint8), ("BoolTensor", torch.bool),
                                        ("LongTensor", torch.int64), ("DoubleTensor", torch.float64)])
def test_legacy_tensor_types(device, name, dtype):
    cls = getattr(torch.musa, name)
    empty = cls(2, 3)
    assert empty.shape == (2, 3) and empty.dtype == dtype and empty.device == device
    data = cls([1, 0])
    torch.testing.assert_close(data.cpu(), getattr(torch, name)([1, 0]))
    assert isinstance(data, cls) and not isinstance(data.cpu(), cls)
    other = torch.musa.IntTensor if dtype != torch.int32 else torch.musa.LongTensor
    assert not isinstance(data, other)
    # Tensor.type accepts the class and its name, as with torch.cuda's classes
    x = torch.tensor([0.0, 1.5, 2.0], device=device)
    for arg in (cls, f"torch.musa.{name}"):
        converted = x.type(arg)
        assert converted.dtype == dtype and converted.device == device and converted.type() == f"torch.musa.{name}"
        torch.testing.assert_close(converted.cpu(), x.cpu().type(getattr(torch, name)))
    assert repr(cls) == f"<class 'torch.musa.{name}'>"


def test_mudnn_flags_are_the_convolution_settings(device):
    import torch.backends.mudnn as mudnn
    assert mudnn is torch.backends.mudnn and mudnn.is_available()
    assert mudnn.allow_tf32 is False  # torch_musa's default: fp32 convolutions stay fp32
    with mudnn.flags(enabled=True, benchmark=True, allow_tf32=True):
        assert mudnn.benchmark and mudnn.allow_tf32 and torch.backends.cudnn.allow_tf32
    assert mudnn.allow_tf32 is False and mudnn.benchmark is False
    orig = mudnn.set_flags(_deterministic=True)
    assert mudnn.deterministic is True
    mudnn.set_flags(*orig)
    assert mudnn.deterministic is False
    with pytest.raises(TypeError, match="must be a bool"):
        mudnn.allow_tf32 = 1
    version = mudnn.version()
    assert isinstance(version, int) and version >= 3000  # the muDNN level of musa's features (MLA RoPE)
    # Convolutions read these flags and still match the CPU.
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    torch.testing.assert_close(torch.nn.functional.conv2d(x.to(device), w.to(device)).cpu(),
                               torch.nn.functional.conv2d(x, w), rtol=1e-5, atol=1e-5)


def test_memory_fraction_argument_errors_as_torch_cuda(device):
    with pytest.raises(TypeError, match="Invalid type for fraction argument, must be `float`"):
        torch.musa.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match="Invalid fraction value: 1.5. Allowed range: 0~1"):
        torch.musa.set_per_process_memory_fraction(1.5)


def test_amp_dtypes_are_the_low_precision_ones():
    assert torch.musa.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("bad", ["cpu", torch.device("cpu"), "cuda:0"])
def test_bad_device_argument_names_the_musa_device(device, bad):
    with pytest.raises(ValueError, match=f"Expected a musa device, but got: {torch.device(bad)}"):
        torch.musa.set_device(bad)
    with pytest.raises(ValueError, match="Expected a musa device, but got"):
        torch.musa.memory_allocated(bad)


def _sync_warnings(fn):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if "synchronizing" in str(w.message)]


def test_sync_debug_mode_reports_what_waits_for_the_device_as_torch_cuda_s(device):
    # torch.cuda's contract: with "warn", ops that make the host wait warn and others do not; with
    # "error" they raise and the process goes on; "default" (0) is off. (On the cuda driver
    # CUDA's own check reports the kernels' waits, in its words.)
    x, idx = torch.arange(6.0, device=device), torch.tensor([1, 2], device=device)
    assert torch.musa.get_sync_debug_mode() == 0
    waits = {"item": lambda: x[0].item(), "to cpu": lambda: x.cpu(), "from cpu": lambda: torch.ones(2).to(device),
             "nonzero": lambda: x.nonzero(),
             "mask index": lambda: x[x > 2], "unique": lambda: x.unique(),
             "stream": lambda: torch.musa.current_stream().synchronize()}
    free = {"add": lambda: x + 1, "int index": lambda: x[idx],
            "non_blocking copy": lambda: x.to("cpu", non_blocking=True)}
    try:
        torch.musa.set_sync_debug_mode("warn")
        assert torch.musa.get_sync_debug_mode() == 1
        for name, fn in waits.items():
            assert _sync_warnings(fn), name
        for name, fn in free.items():
            assert not _sync_warnings(fn), name
        torch.musa.set_sync_debug_mode(2)
        with pytest.raises(RuntimeError, match="synchronizing (MUSA|CUDA) operation"):
            x.sum().item()
        with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
            torch.musa.set_sync_debug_mode("loud")
    finally:
        torch.musa.set_sync_debug_mode("default")
    assert not _sync_warnings(waits["item"]) and x.sum().item() == 15.0


def test_arch_list_names_the_kernels_architecture(device):
    major, minor = torch.musa.get_device_capability()
    if torch.musa.get_driver_name() == "cuda":  # torch's CUDA kernels run musa's ops
        assert torch.musa.get_arch_list() == torch.cuda.get_arch_list()
        assert torch.musa.get_gencode_flags() == torch.cuda.get_gencode_flags()
    else:
        assert torch.musa.get_arch_list() == [f"mp_{major}{minor}"] == ["mp_31"]
        assert torch.musa.get_gencode_flags() == ""


def test_device_monitoring_as_torch_cuda_s(device):
    # Used memory follows an allocation (every process's on a GPU: at least this one's growth).
    if torch.musa.get_driver_name() == "cuda":
        pytest.importorskip("pynvml")  # torch.cuda's monitors read the GPU through it
    torch.musa.empty_cache()  # (a cached block would serve the allocation without new device memory)
    before = torch.musa.device_memory_used()
    x = torch.empty(32 << 20, dtype=torch.uint8, device=device)
    assert torch.musa.device_memory_used() >= before + x.numel()
    if torch.musa.get_driver_name() == "host":
        free, total = torch.musa.mem_get_info()
        assert torch.musa.device_memory_used() == total - free
        assert str(__import__("os").getpid()) in torch.musa.list_gpu_processes()
        for sensor in (torch.musa.utilization, torch.musa.temperature, torch.musa.power_draw, torch.musa.clock_rate,
                       torch.musa.memory_usage):
            with pytest.raises(RuntimeError, match="no sensors.*TORCH_MUSA_DRIVER=cuda"):
                sensor()
    else:
        assert 0 <= torch.musa.utilization() <= 100
        assert torch.musa.temperature() == pytest.approx(torch.cuda.temperature(torch.musa._C._driver_ordinal(0)), abs=3)
    del x


def test_runtime_errors_are_accelerator_errors_as_torch_cuda_s(device):
    # A failed musa runtime call raises torch.AcceleratorError (a RuntimeError), as a failed CUDA call.
    assert torch.musa.AcceleratorError is torch.cuda.AcceleratorError is torch.AcceleratorError
    g = torch.musa.MUSAGraph()
    with pytest.raises(torch.AcceleratorError, match="captur"):
        with torch.musa.graph(g):
            torch.musa.synchronize()
    assert (torch.ones(2, device=device) * 2).sum().item() == 4.0  # the process goes on
