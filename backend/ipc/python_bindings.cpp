// torch_musa._C._ipc: what torch_musa/multiprocessing's reducers call to send
// musa tensors and events to another process.
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "ipc/sent_blocks.h"
#include "ipc/shared_memory.h"

namespace torch_musa::ipc {
namespace {

py::tuple counter_tuple(const CounterSlot& c) { return py::make_tuple(c.pid, c.fd, c.inode, c.slot); }

CounterSlot counter_from(const py::tuple& t) {
  TORCH_CHECK_VALUE(t.size() == 4, "a musa IPC reference counter is (pid, fd, inode, slot)");
  return {t[0].cast<int64_t>(), t[1].cast<int64_t>(), t[2].cast<int64_t>(), t[3].cast<int64_t>()};
}

// A 1-D uint8 musa tensor over `storage`, so Python gets it as tensor.untyped_storage().
at::Tensor byte_tensor_over(c10::Storage storage) {
  auto n = static_cast<int64_t>(storage.nbytes());
  auto t = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                    caffe2::TypeMeta::Make<uint8_t>());
  t.unsafeGetTensorImpl()->set_sizes_contiguous({n});
  return t;
}

// Interprocess events (torch.musa.Event(interprocess=True)) are runtime events
// owned by Python objects through these integer handles.
int64_t as_int(musaEvent_t e) { return reinterpret_cast<int64_t>(e); }
musaEvent_t as_event(int64_t e) {
  TORCH_CHECK_VALUE(e != 0, "the interprocess event was already destroyed");
  return reinterpret_cast<musaEvent_t>(e);
}

}  // namespace

void bind_python(py::module& parent) {
  auto m = parent.def_submodule("_ipc", "sharing musa memory and events between processes");
  m.def("_share_storage", [](const at::Tensor& t) {
    SharedStorage s = share(t.storage());
    return py::make_tuple(static_cast<int>(s.device), py::bytes(s.handle), s.offset_bytes, s.nbytes,
                          counter_tuple(s.counter), s.event_handle.empty() ? py::object(py::none())
                                                                           : py::object(py::bytes(s.event_handle)));
  });
  m.def("_open_storage", [](int device, const py::bytes& handle, int64_t offset, int64_t nbytes,
                            const py::tuple& counter, const py::object& event_handle) {
    SharedStorage s;
    s.device = static_cast<c10::DeviceIndex>(device);
    s.handle = handle.cast<std::string>();
    s.offset_bytes = offset;
    s.nbytes = nbytes;
    s.counter = counter_from(counter);
    if (!event_handle.is_none()) s.event_handle = event_handle.cast<std::string>();
    check_device_index(s.device);
    return byte_tensor_over(open(s));
  });
  m.def("_release_counter", [](const py::tuple& counter) { release(counter_from(counter)); });
  m.def("_collect", [] { return collect(); }, "drops sent blocks receivers released; returns how many remain");
  m.def("_release_all_received", [] { release_all_received(); });

  m.def("_event_create", [](int device) {
    DeviceScope scope(static_cast<c10::DeviceIndex>(device));
    musaEvent_t e = nullptr;
    MUSA_CHECK(musaEventCreateWithFlags(&e, musaEventDisableTiming | musaEventInterprocess));
    return as_int(e);
  });
  m.def("_event_open", [](int device, const py::bytes& handle) {
    std::string bytes = handle;
    TORCH_CHECK_VALUE(bytes.size() == sizeof(musaIpcEventHandle_t), "a musa IPC event handle has ",
                      sizeof(musaIpcEventHandle_t), " bytes, got ", bytes.size());
    musaIpcEventHandle_t h;
    std::memcpy(h.reserved, bytes.data(), sizeof h.reserved);
    DeviceScope scope(static_cast<c10::DeviceIndex>(device));
    musaEvent_t e = nullptr;
    MUSA_CHECK(musaIpcOpenEventHandle(&e, h));
    return as_int(e);
  });
  m.def("_event_handle", [](int64_t e) {
    musaIpcEventHandle_t h;
    MUSA_CHECK(musaIpcGetEventHandle(&h, as_event(e)));
    return py::bytes(h.reserved, sizeof h.reserved);
  });
  m.def("_event_record", [](int64_t e, int device, int64_t stream_id) {
    c10::Stream s = c10::Stream::unpack3(stream_id, static_cast<c10::DeviceIndex>(device), c10::DeviceType::PrivateUse1);
    MUSA_CHECK(musaEventRecord(as_event(e), native_stream(s)));
  });
  m.def("_event_wait", [](int64_t e, int device, int64_t stream_id) {
    c10::Stream s = c10::Stream::unpack3(stream_id, static_cast<c10::DeviceIndex>(device), c10::DeviceType::PrivateUse1);
    MUSA_CHECK(musaStreamWaitEvent(native_stream(s), as_event(e), 0));
  });
  m.def("_event_query", [](int64_t e) {
    musaError_t err = musaEventQuery(as_event(e));
    if (err == musaErrorNotReady) return false;
    MUSA_CHECK(err);
    return true;
  });
  m.def("_event_synchronize", [](int64_t e) {
    py::gil_scoped_release no_gil;
    MUSA_CHECK(musaEventSynchronize(as_event(e)));
  });
  m.def("_event_destroy", [](int64_t e) { MUSA_CHECK(musaEventDestroy(as_event(e))); });
}

}  // namespace torch_musa::ipc
