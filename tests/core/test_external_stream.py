"""torch.musa.ExternalStream: streams made outside torch_musa, as torch.cuda.ExternalStream."""
import ctypes
import os

import pytest
import torch

import torch_musa


class RuntimeStreams:
    """Creates and destroys streams through the MUSA runtime's own C++ API, as another library
    linked against it would (the runtime exports C++ names, hence the mangled symbols)."""

    def __init__(self):
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch_musa.__file__), "libmusart.so"))
        self._create = lib._Z28musaStreamCreateWithPriorityPP11MUstream_stji
        self._create.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_int]
        self._destroy = lib._Z17musaStreamDestroyP11MUstream_st
        self._destroy.argtypes = [ctypes.c_void_p]
        self.last_error = lib._Z16musaGetLastErrorv  # what a library's next launch check would see

    def create(self, priority=0):
        handle = ctypes.c_void_p()
        assert self._create(ctypes.byref(handle), 1, priority) == 0  # musaStreamNonBlocking
        return handle.value

    def destroy(self, handle):
        assert self._destroy(handle) == 0


@pytest.fixture
def runtime_stream():
    streams = RuntimeStreams()
    handle = streams.create(priority=-1)
    yield handle
    torch.musa.synchronize()
    streams.destroy(handle)


def test_handles_of_torch_musa_streams_give_those_streams():
    s = torch.musa.Stream()
    assert torch.musa.ExternalStream(s.musa_stream) == s
    assert torch.musa.get_stream_from_external(s.musa_stream) == s  # torch.cuda's name for it
    default = torch.musa.default_stream()
    assert torch.musa.ExternalStream(default.musa_stream) == default


def test_a_stream_made_outside_torch_musa_runs_musa_ops_in_order(runtime_stream):
    ext = torch.musa.ExternalStream(runtime_stream)
    assert isinstance(ext, torch.musa.Stream)
    assert ext != torch.musa.default_stream()
    assert torch.musa.ExternalStream(runtime_stream) == ext  # the same handle, the same stream
    assert ext.priority == -1  # as it was created
    g = torch.Generator().manual_seed(0)
    a_cpu, b_cpu = torch.randn(64, 64, generator=g), torch.randn(64, 64, generator=g)
    a, b = a_cpu.musa(), b_cpu.musa()
    ext.wait_stream(torch.musa.current_stream())
    with torch.musa.stream(ext):
        assert torch.musa.current_stream() == ext
        c = a @ b
        for _ in range(20):
            c = c * 0.5 + a
        done = ext.record_event()
    torch.musa.current_stream().wait_event(done)
    expected = a_cpu @ b_cpu
    for _ in range(20):
        expected = expected * 0.5 + a_cpu
    torch.testing.assert_close(c.cpu(), expected)
    ext.synchronize()
    assert ext.query()


def test_bad_handles_are_refused_with_the_way_out():
    if torch.musa.get_driver_name() != "host":  # 0 is CUDA's legacy stream there, which musa does not run on
        with pytest.raises(RuntimeError, match="default_stream"):
            torch.musa.ExternalStream(0)
    with pytest.raises(TypeError, match="non-negative int"):
        torch.musa.ExternalStream(-5)
    with pytest.raises(TypeError, match="non-negative int"):
        torch.musa.ExternalStream("0x1234")
    if torch.musa.get_driver_name() == "host":  # (a made-up cudaStream_t could crash CUDA itself)
        bogus = ctypes.c_int(7)
        with pytest.raises(RuntimeError, match="not a live musa stream handle"):
            torch.musa.ExternalStream(ctypes.addressof(bogus))
    assert RuntimeStreams().last_error() == 0  # the refusals left no error behind for others to find
    assert (torch.ones(3, device="musa") + 1).sum().item() == 6  # still usable


@pytest.mark.skipif(torch.musa.get_driver_name() != "cuda", reason="needs the cuda driver's CUDA streams")
def test_a_cuda_stream_becomes_a_musa_stream_whose_work_lands_on_it():
    cs = torch.cuda.Stream(device=torch.musa._C._driver_ordinal(0))
    ext = torch.musa.ExternalStream(cs.cuda_stream)
    assert ext.musa_stream == cs.cuda_stream
    assert torch.musa.ExternalStream(cs.cuda_stream) == ext
    x_cpu = torch.randn(1024)
    x = x_cpu.musa()
    ext.wait_stream(torch.musa.current_stream())
    with torch.musa.stream(ext):
        del_me = torch.sin(x) * 2  # warms ext's cached blocks: no allocation (and sync) below
    del del_me
    with torch.cuda.stream(cs):
        torch.cuda._sleep(1_000_000_000)  # the caller's CUDA stream is busy for a while
    with torch.musa.stream(ext):
        y = torch.sin(x) * 2
    assert not ext.query()  # musa's stream is the caller's: its work queues behind the sleep
    cs.synchronize()
    assert ext.query()
    torch.musa.current_stream().wait_stream(ext)
    torch.testing.assert_close(y.cpu(), torch.sin(x_cpu) * 2)
