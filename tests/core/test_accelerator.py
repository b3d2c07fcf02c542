"""torch.accelerator.* with musa, and torch.musa.Stream/Event as torch.Stream/Event (as torch.cuda's are)."""
import time

import pytest
import torch

acc = torch.accelerator


def _need(name):
    if not hasattr(acc, name):
        pytest.skip(f"torch.accelerator.{name} is not in torch {torch.__version__}")
    return getattr(acc, name)


def test_current_accelerator_is_musa():
    assert acc.is_available()
    dev = acc.current_accelerator()
    assert dev.type == "musa"
    assert acc.device_count() == torch.musa.device_count()


def test_device_index_get_set():
    assert acc.current_device_index() == torch.musa.current_device() == 0
    if torch.musa.device_count() > 1:
        acc.set_device_index(1)
        try:
            assert torch.musa.current_device() == 1
            assert acc.current_device_index() == 1
        finally:
            acc.set_device_index(0)
        with acc.device_index(1):
            assert torch.musa.current_device() == 1
        assert torch.musa.current_device() == 0


def test_accelerator_streams_are_musa_streams():
    s = acc.current_stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("musa", 0)
    assert s == torch.musa.current_stream()
    assert s.stream_id == torch.musa.default_stream().stream_id
    ms = torch.musa.Stream()
    acc.set_stream(ms)
    try:
        assert torch.musa.current_stream() == ms
        assert acc.current_stream() == ms
    finally:
        acc.set_stream(torch.musa.default_stream())


def test_accelerator_synchronize():
    x = torch.randn(100, device="musa")
    y = x * 2
    acc.synchronize()
    acc.synchronize(0)
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)


def test_stream_event_subclass_torch_generic():
    assert issubclass(torch.musa.Stream, torch.Stream)
    assert issubclass(torch.musa.Event, torch.Event)
    s = torch.musa.Stream()
    e = torch.musa.Event()
    assert isinstance(s, torch.Stream) and isinstance(e, torch.Event)
    assert s.device.type == "musa"
    assert torch.musa.current_stream().__class__ is torch.musa.Stream
    assert torch.musa.default_stream().__class__ is torch.musa.Stream


def test_generic_torch_stream_and_event_on_musa(same):
    s = torch.Stream(device="musa")
    assert s.device.type == "musa"
    e = torch.Event(device="musa", enable_timing=True)
    x = torch.zeros(16, device="musa")
    with s:  # torch.Stream is a context manager that makes it current
        assert torch.musa.current_stream().stream_id == s.stream_id
        x.add_(5)
        e.record(s)
    assert torch.musa.current_stream() == torch.musa.default_stream()
    e.synchronize()
    assert e.query()
    same(x, torch.full((16,), 5.0))
    s.synchronize()
    assert s.query()


def test_stream_context_manager_torch_musa_stream():
    s = torch.musa.Stream()
    with s:
        assert torch.musa.current_stream() == s
        assert acc.current_stream() == s
    assert torch.musa.current_stream() == torch.musa.default_stream()


def test_event_elapsed_time_generic_and_mixed():
    # torch.musa.Event.elapsed_time accepts a generic torch.Event (the reverse is torch's own
    # torch.Event.elapsed_time, which only takes exact torch.Event objects)
    start = torch.musa.Event(enable_timing=True)
    end = torch.Event(device="musa", enable_timing=True)
    start.record()
    time.sleep(0.01)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 8.0 <= ms < 10_000
    ms2 = start.elapsed_time(start)
    assert ms2 == pytest.approx(0.0, abs=1e-3)


def test_stream_wait_event_and_wait_stream_generic(same):
    s1, s2 = torch.Stream(device="musa"), torch.Stream(device="musa")
    x = torch.zeros(8, device="musa")
    with s1:
        x.add_(1)
    s2.wait_stream(s1)
    e = s1.record_event()
    s2.wait_event(e)
    with s2:
        y = x + 1
    s2.synchronize()
    same(y, torch.full((8,), 2.0))


def test_accelerator_memory_api_matches_torch_musa():
    mem = _need("memory_allocated")
    torch.musa.synchronize()
    x = torch.empty(1 << 20, dtype=torch.uint8, device="musa")
    assert mem() == torch.musa.memory_allocated()
    assert acc.memory_reserved() == torch.musa.memory_reserved()
    assert acc.max_memory_allocated() == torch.musa.max_memory_allocated()
    stats = acc.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch.musa.memory_allocated()
    acc.reset_peak_memory_stats()
    assert acc.max_memory_allocated() == torch.musa.memory_allocated()
    del x
    acc.empty_cache()
    assert acc.memory_reserved() == torch.musa.memory_reserved()


def test_accelerator_get_memory_info():
    info = _need("get_memory_info")
    free, total = info(0)
    assert total == torch.musa.get_device_properties(0).total_memory
    assert 0 < free <= total


def test_tensor_to_accelerator_device():
    dev = acc.current_accelerator()
    t = torch.arange(5.0).to(dev)
    assert t.is_musa
    assert torch.equal(t.cpu(), torch.arange(5.0))


def test_accelerator_streams_on_device1(two_devices):
    s = torch.Stream(device="musa:1")
    assert s.device_index == 1
    acc.set_stream(s)
    try:
        # set_stream also makes the stream's device current, like torch.accelerator documents
        assert acc.current_device_index() == 1
        assert acc.current_stream(1) == s
    finally:
        acc.set_stream(torch.musa.default_stream(1))
        acc.set_device_index(0)


def test_device_capability_lists_the_dtypes_musa_tensors_hold():
    caps = _need("get_device_capability")("musa:0")
    dtypes = caps["supported_dtypes"]
    assert caps == acc.get_device_capability() == acc.get_device_capability(0)
    assert {torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.complex64} <= dtypes
    probe = torch.tensor([0, 1, 2, 3])
    quantized = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}
    for dt in dtypes - quantized:  # each one is allocated on musa and converts as on the CPU
        assert torch.empty(2, dtype=dt, device="musa").dtype == dt
        try:
            want = probe.to(dt).to(torch.float64)
        except (RuntimeError, NotImplementedError):  # no conversion on the CPU either (float4 packs)
            continue
        musa = probe.to("musa").to(dt)
        assert musa.dtype == dt and musa.device.type == "musa"
        torch.testing.assert_close(musa.to(torch.float64).cpu(), want)
    # Quantized tensors live on musa (backend/tensor_kinds/): each claimed dtype holds the CPU's values.
    assert quantized <= dtypes
    x = torch.linspace(-1, 1, 8)
    for dt in quantized:
        q = torch.quantize_per_tensor(x, 0.1, 2, dt)
        m = q.to("musa")
        assert m.device.type == "musa" and m.dtype == dt
        assert torch.equal(m.int_repr().cpu(), q.int_repr())
        torch.testing.assert_close(m.dequantize().cpu(), q.dequantize(), rtol=0, atol=0)
    # The versioned capability agrees with the device properties, as torch.cuda's does.
    props = torch.musa.get_device_properties(0)
    assert torch.musa.get_device_capability() == (props.major, props.minor)
    with pytest.raises(RuntimeError, match="device"):
        acc.get_device_capability(torch.musa.device_count())


def test_torch_version_musa_is_the_runtime_api_level():
    assert isinstance(torch.version.musa, str)
    assert float(torch.version.musa) >= 4000  # how torch_musa programs gate on it
