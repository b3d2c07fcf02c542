"""Streams and events: torch.cuda-shaped semantics (ordering, waits, queries, timing, context managers)."""
import time

import pytest
import torch


def test_stream_create_and_properties():
    s = torch.musa.Stream()
    assert s.device == torch.device("musa", 0)
    assert s.device_index == 0
    assert s != torch.musa.default_stream()
    assert s.query()
    s.synchronize()
    hp = torch.musa.Stream(priority=-1)
    assert hp.priority <= 0
    assert torch.musa.Stream(priority=0).priority == 0


def test_default_stream_is_current_by_default():
    assert torch.musa.current_stream() == torch.musa.default_stream()
    assert torch.musa.default_stream().stream_id == torch.musa.default_stream(0).stream_id
    assert hash(torch.musa.current_stream()) == hash(torch.musa.default_stream())


def test_stream_context_switches_and_restores():
    s = torch.musa.Stream()
    prev = torch.musa.current_stream()
    with torch.musa.stream(s):
        assert torch.musa.current_stream() == s
    assert torch.musa.current_stream() == prev
    with torch.musa.stream(None):  # like torch.cuda.stream(None): no-op
        assert torch.musa.current_stream() == prev


def test_set_stream():
    s = torch.musa.Stream()
    torch.musa.set_stream(s)
    try:
        assert torch.musa.current_stream() == s
    finally:
        torch.musa.set_stream(torch.musa.default_stream())
    assert torch.musa.current_stream() == torch.musa.default_stream()


def test_work_on_side_stream_matches_cpu(same):
    a = torch.randn(64, 64)
    s = torch.musa.Stream()
    ma = a.musa()
    s.wait_stream(torch.musa.current_stream())
    with torch.musa.stream(s):
        mb = ma @ ma + 1
    torch.musa.current_stream().wait_stream(s)
    same(mb, a @ a + 1, rtol=1e-5, atol=1e-4)


def test_stream_ordering_many_inplace_ops(same):
    s = torch.musa.Stream()
    x = torch.zeros(1000, device="musa")
    with torch.musa.stream(s):
        for _ in range(50):
            x.add_(1)
    s.synchronize()
    same(x, torch.full((1000,), 50.0))


def test_event_record_query_synchronize():
    e = torch.musa.Event()
    x = torch.randn(100, device="musa")
    y = x * 2
    e.record()
    e.synchronize()
    assert e.query()
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)


def test_event_wait_orders_streams(same):
    s1, s2 = torch.musa.Stream(), torch.musa.Stream()
    x = torch.zeros(256, device="musa")
    with torch.musa.stream(s1):
        x.add_(3)
        e = s1.record_event()
    s2.wait_event(e)
    with torch.musa.stream(s2):
        y = x * 2
    s2.synchronize()
    same(y, torch.full((256,), 6.0))


def test_stream_record_event_returns_musa_event():
    s = torch.musa.Stream()
    e = s.record_event()
    assert isinstance(e, torch.musa.Event)
    e.synchronize()
    assert e.query()


def test_event_elapsed_time():
    start = torch.musa.Event(enable_timing=True)
    end = torch.musa.Event(enable_timing=True)
    start.record()
    x = torch.randn(256, 256, device="musa")
    for _ in range(5):
        x = x @ x.t() / 256
    time.sleep(0.02)  # host time passes between the records
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float)
    # as on a GPU that is idle while the host sleeps, the end event is timestamped after the sleep
    assert 15.0 <= ms < 60_000


def test_elapsed_time_needs_timing():
    # torch.cuda raises when an event was created without enable_timing
    a, b = torch.musa.Event(), torch.musa.Event()
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        a.elapsed_time(b)


def test_elapsed_time_unrecorded_raises():
    a, b = torch.musa.Event(enable_timing=True), torch.musa.Event(enable_timing=True)
    with pytest.raises((RuntimeError, ValueError), match="recorded"):
        a.elapsed_time(b)


def test_unrecorded_event_query_is_true():
    # torch.cuda.Event().query() is True before any record
    assert torch.musa.Event().query()


def test_non_blocking_copies_visible_after_sync(same):
    cpu = torch.randn(1000).pin_memory()
    m = cpu.to("musa", non_blocking=True)
    back = m.to("cpu", non_blocking=True)
    torch.musa.synchronize()
    assert torch.equal(back, cpu)
    same(m, cpu)


def test_stream_on_device1(two_devices):
    s = torch.musa.Stream(device=1)
    assert s.device_index == 1
    with torch.musa.stream(s):
        # like CUDA: entering a stream context makes its device current
        assert torch.musa.current_device() == 1
        assert torch.musa.current_stream() == s
        t = torch.ones(3, device="musa")
    assert t.device == torch.device("musa", 1)
    assert torch.musa.current_device() == 0
    assert torch.musa.current_stream(1) == torch.musa.default_stream(1)


def test_current_stream_per_device(two_devices):
    s1 = torch.musa.Stream(device=1)
    torch.musa.set_stream(s1)
    try:
        assert torch.musa.current_stream(1) == s1
        assert torch.musa.current_stream(0) == torch.musa.default_stream(0)
    finally:
        torch.musa.set_stream(torch.musa.default_stream(1))


def test_event_repr_in_torch_cudas_form():
    import ctypes
    import types

    e = torch.musa.Event()
    for _ in range(2):  # unrecorded, then recorded (torch.cuda makes the event at its first record too)
        cuda_form = torch.cuda.Event.__repr__(types.SimpleNamespace(
            cuda_event=e.event_id, _as_parameter_=ctypes.c_void_p(e.event_id)))
        assert repr(e) == cuda_form.replace("torch.cuda.Event", "torch_musa.Event")
        e.record()
    assert repr(e) != "<torch_musa.Event uninitialized>"


def test_stream_repr_in_torch_cudas_form():
    import types

    s = torch.musa.Stream()
    for stream in (s, torch.musa.default_stream()):
        # torch.cuda.Stream's own __repr__ over the same device and handle, with musa's names
        cuda_form = torch.cuda.Stream.__repr__(types.SimpleNamespace(device=f"musa:{stream.device_index}",
                                                                     cuda_stream=stream.musa_stream))
        assert repr(stream) == cuda_form.replace("torch.cuda.Stream", "torch_musa.Stream").replace(
            "cuda_stream=", "musa_stream=")


def test_default_stream_handle_is_zero_on_the_host_driver_as_cudas():
    if torch.musa.get_driver_name() != "host":
        pytest.skip("the cuda driver's default musa stream is a CUDA stream of its own (non-zero handle)")
    default = torch.musa.default_stream()
    assert default.musa_stream == 0 and torch.musa.current_stream().musa_stream == 0
    assert torch.musa.Stream().musa_stream != 0
    assert torch.musa.ExternalStream(0) == default  # as torch.cuda.ExternalStream(0) is CUDA's default stream
    with torch.musa.stream(torch.musa.ExternalStream(0)):
        x = torch.arange(4.0, device="musa") * 2
    assert torch.equal(x.cpu(), torch.arange(4.0) * 2)


def test_a_not_ready_query_leaves_no_error_for_the_next_kernel(device):
    # CUDA keeps a query's cudaErrorNotReady as the thread's last error; the next ATen kernel's launch
    # check would report it as its own ("device not ready") unless the driver clears it, as torch does
    torch.musa._sleep(200_000_000)  # keeps the stream busy (the host driver holds it, as a spin kernel does)
    e = torch.musa.Event()
    e.record()
    ready = (e.query(), torch.musa.current_stream().query())
    assert ready == (False, False)
    y = torch.ones(4, device=device) * 2
    assert torch.equal(y.cpu(), torch.full((4,), 2.0))


def _spin_ms(ms):
    return int(ms * 1_000_000)  # torch.musa._sleep's cycles; the host driver's clock is 1 GHz


def test_a_slept_stream_is_busy_until_the_spin_ends_as_cudas(device):
    # torch.cuda._sleep: the caller goes on; the stream, the events recorded after it and streams
    # waiting on them are not ready until the spin is over
    torch.musa.synchronize()
    s = torch.musa.current_stream()
    start, end = torch.musa.Event(enable_timing=True), torch.musa.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    torch.musa._sleep(_spin_ms(100))
    end.record()
    assert time.perf_counter() - t0 < 0.05  # launched, not waited for
    assert (start.query(), end.query(), s.query()) == (True, False, False)
    waiter = torch.musa.Stream()
    waiter.wait_event(end)
    assert waiter.query() is False
    waiter.synchronize()
    assert end.query() and s.query() and waiter.query()
    assert start.elapsed_time(end) >= 20
    torch.musa._sleep(_spin_ms(50))
    x = torch.ones(3, device=device)
    assert x.cpu().tolist() == [1.0, 1.0, 1.0] and s.query()  # a blocking copy waits for the stream


def test_a_held_stream_of_one_device_leaves_the_other_ready(two_devices):
    torch.musa.synchronize(0)
    s0 = torch.musa.current_stream(0)
    with torch.musa.device(1):
        s1 = torch.musa.current_stream()
        torch.musa._sleep(_spin_ms(100))
    for d in (0, 1):
        with torch.musa.device(d):
            assert (s0.query(), s1.query()) == (True, False)
    with torch.musa.device(0):
        s1.synchronize()  # from another device, as CUDA allows
    assert s0.query() and s1.query()


def test_elapsed_time_between_events_of_two_devices_raises_as_cudas(two_devices):
    e0, e1 = torch.musa.Event(enable_timing=True), torch.musa.Event(enable_timing=True)
    e0.record(torch.musa.current_stream(0))
    e1.record(torch.musa.current_stream(1))
    e1.synchronize()
    for d in (0, 1):
        with torch.musa.device(d), pytest.raises(RuntimeError, match="same device"):
            e0.elapsed_time(e1)
    e2 = torch.musa.Event(enable_timing=True)
    e2.record(torch.musa.current_stream(0))
    e2.synchronize()
    with torch.musa.device(1):  # two events of one device time from any device
        assert e0.elapsed_time(e2) >= 0
