// torch_musa._C: the small Python surface over the runtime and backend.
// Most of torch.musa is plain Python over torch's generic device APIs.
#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Generator.h>

#include <thread>

#include "memory/caching_allocator.h"
#include "ops/delegate.h"
#include "tensor_kinds/tensor_kinds.h"
#include "ops/double_cast.h"
#include "ops/dtype_widening.h"
#include "ops/host_direct.h"
#include "fp8/fp8.h"
#include "core/device.h"
#include "core/generator.h"
#include "core/musa_check.h"
#include "ops/routed_blocks.h"
#include "core/stream.h"
#include "core/sync_debug.h"
#include "profiler/device_activity.h"
#include "version_gates.h"

namespace py = pybind11;

namespace torch_musa::allocator {
void bind_python(py::module& m);  // allocator_python.cpp: snapshots, history, pools, settings
}
namespace torch_musa::distributed {
void bind_python(py::module& m);  // distributed/python_bindings.cpp: ProcessGroupMCCL
}
namespace torch_musa::graphs {
void bind_python(py::module& m);  // graphs/python_bindings.cpp: MUSAGraph
}
namespace torch_musa::ipc {
void bind_python(py::module& m);  // ipc/python_bindings.cpp: sharing with other processes
}
namespace torch_musa::compile {
void bind_python(py::module& m);  // compile/python_bindings.cpp: kernel regions and their boundary
}

namespace torch_musa {
namespace {

py::dict device_properties(c10::DeviceIndex device) {
  check_device_index(device);
  musaDeviceProp p{};
  MUSA_CHECK(musaGetDeviceProperties(&p, device));
  py::dict d;
  d["name"] = std::string(p.name);
  d["total_memory"] = p.totalGlobalMem;
  d["multi_processor_count"] = p.multiProcessorCount;
  d["major"] = p.major;
  d["minor"] = p.minor;
  d["warp_size"] = p.warpSize;
  d["max_threads_per_block"] = p.maxThreadsPerBlock;
  d["L2_cache_size"] = p.l2CacheSize;
  d["is_host_emulated"] = p.isHostEmulated != 0;
  d["uuid"] = std::string(p.uuid);
  d["is_integrated"] = p.integrated;  // ints, as torch.cuda's
  d["is_multi_gpu_board"] = p.isMultiGpuBoard;
  d["max_threads_per_multi_processor"] = p.maxThreadsPerMultiProcessor;
  d["regs_per_multiprocessor"] = p.regsPerMultiprocessor;
  d["shared_memory_per_block"] = p.sharedMemPerBlock;
  d["shared_memory_per_multiprocessor"] = p.sharedMemPerMultiprocessor;
  d["shared_memory_per_block_optin"] = p.sharedMemPerBlockOptin;
  d["clock_rate"] = p.clockRate;
  d["memory_clock_rate"] = p.memoryClockRate;
  d["memory_bus_width"] = p.memoryBusWidth;
  d["pci_bus_id"] = p.pciBusID;
  d["pci_device_id"] = p.pciDeviceID;
  d["pci_domain_id"] = p.pciDomainID;
  return d;
}

}  // namespace
}  // namespace torch_musa

PYBIND11_MODULE(_C, m) {
  using namespace torch_musa;
  m.doc() = "torch_musa native extension";
  fp8::register_host_scaled_mm_rules();  // before the op layer takes every op without a kernel
  register_cuda_contiguous_inputs();
  delegate_structured_ops();
  tensor_kinds::delegate_kind_kernels();
  register_host_sync_batch_norm();
  m.attr("_torch_version_major") = TORCH_VERSION_MAJOR;
  m.attr("_torch_version_minor") = TORCH_VERSION_MINOR;

  m.def("_driver_name", [] { return std::string(musaGetDriverName()); });
  m.def("_runtime_version", [] {
    int v = 0;
    MUSA_CHECK(musaRuntimeGetVersion(&v));
    return v;
  });
  m.def("_built_drivers", [] { return std::string(musaGetBuiltDrivers()); });
  m.def("_device_count", [] { return static_cast<int>(device_count()); });
  m.def("_init_error", []() -> std::string {
    int n = 0;
    if (musaGetDeviceCount(&n) != musaSuccess) {
      std::string msg = musaGetLastErrorMessage();
      (void)musaGetLastError();
      return msg.empty() ? "unknown error" : msg;
    }
    return "";
  });
  m.def("_current_device", [] { return static_cast<int>(current_device()); });
  m.def("_in_bad_fork", [] { return in_bad_fork(); });
  // Test hook: a musa block lent to the kernel device by this thread and
  // released by another thread while "the op" still runs must stay allocated
  // until the op ends, then be freed. Returns (released, bytes during, bytes after).
  m.def("_check_lent_block_released_elsewhere", [] {
    auto d = current_device();
    auto allocated = [d] { return allocator::device_stats(d).allocated_bytes[0].current; };
    int64_t before = allocated();
    c10::DataPtr musa = allocator::get()->allocate(1 << 20);
    void* p = musa.get();
    routed_blocks::lend(std::move(musa));
    bool released = false;
    std::thread([&] {
      released = !routed_blocks::release(p, false) && allocator::is_allocated_block(p) &&
                 routed_blocks::release(p, true);
    }).join();
    int64_t during = allocated() - before;
    routed_blocks::end_op();
    return std::make_tuple(released, during, allocated() - before);
  });
  m.def("_set_device", [](int d) { set_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_set_sync_debug_mode", &set_sync_debug_mode);
  m.def("_get_sync_debug_mode", &sync_debug_mode);
  m.def("_synchronize", [](int d) {
    py::gil_scoped_release no_gil;
    DeviceScope scope(static_cast<c10::DeviceIndex>(d));
    profiler::RuntimeCall call("musaDeviceSynchronize");
    MUSA_CHECK(musaDeviceSynchronize());
  });
  m.def("_device_properties", [](int d) { return device_properties(static_cast<c10::DeviceIndex>(d)); });
  m.def("_is_initialized", [](int d) { return is_device_initialized(static_cast<c10::DeviceIndex>(d)); });
  m.def("_stream_priority_range", [] {
    int least = 0, greatest = 0;
    MUSA_CHECK(musaDeviceGetStreamPriorityRange(&least, &greatest));
    return py::make_tuple(least, greatest);
  });
  // The driver's handle behind the current musa stream (a cudaStream_t on the
  // cuda driver): what compiled Triton kernels and extensions launch on.
  // (The host driver has no handle below its own streams: the musa stream is the handle.)
  m.def("_current_raw_stream", [](int d) {
    return reinterpret_cast<uintptr_t>(user_stream_handle(current_stream(static_cast<c10::DeviceIndex>(d))));
  });
  // The raw handle of a musa stream given by id: the driver's (cudaStream_t) where there is one.
  m.def("_stream_raw_handle", [](int64_t id, int device) {
    return reinterpret_cast<uintptr_t>(user_stream_handle(
        c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)),
                    static_cast<c10::StreamId>(id))));
  });
  // torch.musa._sleep on the host driver: the current stream stays busy, the caller goes on.
  m.def("_stream_spin", [](int d, unsigned long long cycles) {
    MUSA_CHECK(musaStreamSpin(native_stream(current_stream(static_cast<c10::DeviceIndex>(d))), cycles));
  });
  // torch.musa.ExternalStream: the stream id for a handle made outside torch_musa.
  m.def("_external_stream", [](uintptr_t raw, int device) {
    return external_stream(static_cast<c10::DeviceIndex>(device), reinterpret_cast<void*>(raw)).id();
  });
  // The driver's own index of musa device d (the CUDA ordinal on the cuda driver).
  m.def("_driver_ordinal", [](int d) {
    int ord = 0;
    MUSA_CHECK(musaDeviceGetDriverOrdinal(d, &ord));
    return ord;
  });
  m.def("_stream_priority", [](int64_t id, int device) {
    return stream_priority(c10::Stream(c10::Stream::UNSAFE,
                                       c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)),
                                       id));
  });

  m.def("_reset_peak_stats", [](int d) { allocator::reset_peak_stats(static_cast<c10::DeviceIndex>(d)); });
  m.def("_reset_accumulated_stats", [](int d) { allocator::reset_accumulated_stats(static_cast<c10::DeviceIndex>(d)); });
  m.def("_empty_cache", [] { allocator::empty_cache(); });
  m.def("_mem_get_info", [](int d) {
    DeviceScope scope(static_cast<c10::DeviceIndex>(d));
    size_t free = 0, total = 0;
    MUSA_CHECK(musaMemGetInfo(&free, &total));
    return py::make_tuple(free, total);
  });
  m.def("_set_memory_fraction", [](double f, int d) { allocator::set_memory_fraction(f, static_cast<c10::DeviceIndex>(d)); });
  allocator::bind_python(m);

  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(d))));
  });

  // torch.Event.elapsed_time rejects subclasses as `other`; read both events directly.
  m.def("_event_elapsed_time", [](py::handle a, py::handle b) {
    TORCH_CHECK(THPEvent_Check(a.ptr()) && THPEvent_Check(b.ptr()), "elapsed_time expects two torch.Event objects");
    auto& ea = reinterpret_cast<THPEvent*>(a.ptr())->event;
    auto& eb = reinterpret_cast<THPEvent*>(b.ptr())->event;
    py::gil_scoped_release no_gil;
    return ea.elapsedTime(eb);
  });
  m.def("_copy_path_counts", [] { return copy_path_counts(); });
  m.def("_reset_copy_path_counts", [] { reset_copy_path_counts(); });
  m.def("_widened_op_counts", [] { return op_layer::widened_op_counts(); });
  m.def("_reset_widened_op_counts", [] { op_layer::reset_widened_op_counts(); });
  m.def("_double_cast_enabled", [] { return op_layer::double_cast_enabled(); });
  m.def("_set_double_cast", [](bool on) { op_layer::set_double_cast(on); });
  m.def("_delegated_op_count", [] { return delegated_op_count(); });
  m.def("_set_host_direct", [](bool on) { op_layer::set_host_direct(on); });
  m.def("_host_direct_enabled", [] { return op_layer::host_direct_enabled(); });
  distributed::bind_python(m);
  graphs::bind_python(m);
  ipc::bind_python(m);
  compile::bind_python(m);
}
