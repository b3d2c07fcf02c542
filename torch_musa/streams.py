"""Streams and events, subclassing torch.Stream / torch.Event like torch.cuda's."""
from typing import Optional

import torch

from . import _C
from ._core.device import _check_index, _index, _lazy_init, current_device


class Stream(torch.Stream):
    """A musa stream: an ordered queue of work on one device.

    ``priority`` 0 is normal; negative numbers are higher priority.
    """

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        _lazy_init()
        if "stream_id" in kwargs:  # wrapping an existing stream
            return super().__new__(cls, **kwargs)
        index = _check_index(_index(device))
        return super().__new__(cls, device=torch.device("musa", index), priority=priority)

    @property
    def priority(self) -> int:
        return _C._stream_priority(self.stream_id, self.device_index)

    @staticmethod
    def priority_range() -> tuple:
        """(least, greatest) stream priority; a lower number is a higher priority."""
        return tuple(_C._stream_priority_range())

    @property
    def musa_stream(self) -> int:
        """The raw stream handle, as an int (torch.cuda.Stream.cuda_stream's counterpart): the
        runtime's musaStream_t on the host driver, the cudaStream_t under it on the cuda driver."""
        return _C._stream_raw_handle(self.stream_id, self.device_index)

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, torch.Stream) and super().__eq__(other)

    def __hash__(self):
        return hash((self.stream_id, self.device_index, self.device_type))

    def __repr__(self):  # torch.cuda.Stream's form, named as torch_musa's own (MooreThreads') are
        return f"<torch_musa.Stream device=musa:{self.device_index} musa_stream={self.musa_stream:#x}>"


class ExternalStream(Stream):
    """A stream created outside torch_musa, as torch.cuda.ExternalStream: ``stream_ptr`` is the
    raw handle (what ``Stream.musa_stream`` gives: a runtime musaStream_t made by
    musaStreamCreate, or on the cuda driver a cudaStream_t, e.g. from a CUDA library or
    ``torch.cuda.Stream().cuda_stream``). musa ops run on it under ``torch.musa.stream(...)``.
    The stream stays the creator's: keep it alive while musa uses it; torch_musa never destroys it.
    """

    def __new__(cls, stream_ptr: int, device=None, **kwargs):
        if not isinstance(stream_ptr, int) or isinstance(stream_ptr, bool) or stream_ptr < 0:
            raise TypeError(f"ExternalStream needs the stream handle as a non-negative int, got {stream_ptr!r}")
        _lazy_init()
        index = _check_index(_index(device))
        sid = _C._external_stream(stream_ptr, index)
        return super().__new__(cls, stream_id=sid, device_index=index, device_type=_device_type())

    def __repr__(self):
        return f"<torch_musa.ExternalStream device=musa:{self.device_index} musa_stream={self.musa_stream:#x}>"


def get_stream_from_external(data_ptr: int, device=None) -> Stream:
    """torch.cuda.get_stream_from_external: the musa stream over a handle another library made
    (an :class:`ExternalStream`; the library keeps owning it)."""
    return ExternalStream(data_ptr, device=device)


class Event(torch.Event):
    """A musa event: marks a point in a stream for waiting and timing."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            if enable_timing:
                raise ValueError("an interprocess musa event cannot time (as CUDA's): use enable_timing=False")
            return _InterprocessEvent._create(_index(None))
        return super().__new__(cls, device="musa", enable_timing=enable_timing, blocking=blocking)

    @classmethod
    def from_ipc_handle(cls, device, handle: bytes) -> "Event":
        """Opens an event another process made with ``interprocess=True`` (its ``ipc_handle()``)."""
        return _InterprocessEvent._open(_index(device), handle)

    def ipc_handle(self) -> bytes:
        raise RuntimeError("this musa event cannot be shared with another process: create it with "
                           "torch.musa.Event(interprocess=True)")

    @property
    def device(self) -> Optional[torch.device]:
        """The device of the stream it was recorded on; None before the first record, as torch.cuda's."""
        return super().device if self.event_id else None

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, with timing)."""
        return _C._event_elapsed_time(self, end_event)

    def __repr__(self):  # torch.cuda.Event's form: the event's handle, made at the first record
        return f"<torch_musa.Event {self.event_id:#x}>" if self.event_id else "<torch_musa.Event uninitialized>"


class _InterprocessEvent(Event):
    """An event shareable with other processes (``Event(interprocess=True)``): a runtime event
    made with musaEventInterprocess, owned here, whose handle another process opens."""

    @classmethod
    def _create(cls, device: int) -> "_InterprocessEvent":
        _lazy_init()
        self = torch.Event.__new__(cls, device="musa")
        self._device_index, self._raw = device, _C._ipc._event_create(device)
        return self

    @classmethod
    def _open(cls, device: int, handle: bytes) -> "_InterprocessEvent":
        _lazy_init()
        self = torch.Event.__new__(cls, device="musa")
        self._device_index, self._raw = device, _C._ipc._event_open(device, handle)
        return self

    @property
    def device(self) -> torch.device:
        return torch.device("musa", self._device_index)

    def ipc_handle(self) -> bytes:
        return _C._ipc._event_handle(self._raw)

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        stream = current_stream(self._device_index) if stream is None else stream
        _C._ipc._event_record(self._raw, stream.device_index, stream.stream_id)

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        stream = current_stream(self._device_index) if stream is None else stream
        _C._ipc._event_wait(self._raw, stream.device_index, stream.stream_id)

    def query(self) -> bool:
        return _C._ipc._event_query(self._raw)

    def synchronize(self) -> None:
        _C._ipc._event_synchronize(self._raw)

    def elapsed_time(self, end_event: torch.Event) -> float:
        raise RuntimeError("an interprocess musa event has timing disabled (as CUDA's); time with "
                           "torch.musa.Event(enable_timing=True)")

    def __del__(self):
        raw, self._raw = getattr(self, "_raw", 0), 0
        if raw and _C is not None:
            try:
                _C._ipc._event_destroy(raw)
            except Exception:  # at interpreter exit the runtime may be gone
                pass

    def __repr__(self):
        return f"<torch_musa.Event {self._raw:#x}>"


def _sleep(cycles: int) -> None:
    """Keeps the current musa stream busy for about ``cycles`` device clock cycles (tests use
    it to hold a stream back), as torch.cuda._sleep: a spin kernel on the GPU under the musa
    stream on the cuda driver; on the host driver, which runs work inline, the stream is held busy
    for ``cycles`` ns (queries, events and synchronizations see it busy) while the caller goes on."""
    if not isinstance(cycles, int) or cycles < 0:
        raise ValueError(f"_sleep needs a non-negative int number of cycles, got {cycles!r}")
    _lazy_init()
    d = current_device()
    if _C._driver_name() == "host":
        _C._stream_spin(d, cycles)
        return
    with torch.cuda.device(_C._driver_ordinal(d)), torch.cuda.stream(torch.cuda.ExternalStream(_C._current_raw_stream(d))):
        torch.cuda._sleep(cycles)


def _wrap(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device=None) -> Stream:
    if torch.compiler.is_compiling():
        # What Dynamo traces (into a stream it tracks), as it does torch.cuda.current_stream.
        if device is None:
            return torch.accelerator.current_stream()
        return torch.accelerator.current_stream(torch.device(_traced_device(device)))
    _lazy_init()
    index = _check_index(_index(device))
    return _wrap(torch.accelerator.current_stream(torch.device("musa", index)))


def _traced_device(device) -> str:
    if isinstance(device, int):
        return f"musa:{device}"
    return str(device)


def default_stream(device=None) -> Stream:
    _lazy_init()
    index = _check_index(_index(device))
    return Stream(stream_id=0, device_index=index, device_type=_device_type())


def _device_type() -> int:
    """The numeric device type torch.Stream uses for musa (PrivateUse1)."""
    return torch.accelerator.current_stream(torch.device("musa", 0)).device_type


def set_stream(stream: Optional[torch.Stream]) -> None:
    if stream is None:
        return
    if stream.device.type != "musa":
        raise ValueError(f"set_stream expects a musa stream, got a stream of {stream.device}")
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes ``stream`` current on its device (and the device current)."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.prev_streams = None
        self.prev_device = None

    def __enter__(self):
        if self.stream is None:
            return self
        from ._core.device import current_device, set_device

        self.prev_device = current_device()
        target = self.stream.device_index
        # Like CUDA: remember the current stream of both devices.
        self.prev_streams = [torch.accelerator.current_stream(torch.device("musa", i))
                             for i in {self.prev_device, target}]
        if target != self.prev_device:
            set_device(target)
        torch.accelerator.set_stream(self.stream)
        return self

    def __exit__(self, *args):
        if self.stream is None:
            return False
        from ._core.device import set_device

        for s in self.prev_streams:
            torch.accelerator.set_stream(s)
        set_device(self.prev_device)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    return StreamContext(stream)
