#include "memory/unified_allocator.h"

#include <c10/util/Exception.h>
#include <musa/runtime.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/Storage.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <pthread.h>
#include <unistd.h>

#include "core/musa_check.h"
#include "memory/allocator_config.h"

namespace torch_musa::allocator {
namespace {

struct Peaked {
  std::atomic<int64_t> current{0}, peak{0};
  void add(int64_t n) {
    int64_t now = current.fetch_add(n) + n;
    int64_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
};

Peaked g_host;
std::atomic<int64_t> g_host_allocated{0}, g_host_freed{0};
constexpr int kMaxDevices = 64;
std::array<Peaked, kMaxDevices> g_views;

// Sizes of live allocations, for the statistics at free (the deleter gets only the pointer,
// so raw_allocate / raw_deleter work as for any CPU allocator).
std::mutex g_sizes_mu;
std::unordered_map<void*, size_t> g_sizes;

std::atomic<pid_t> g_owner_pid{0};  // the process whose runtime made the allocations

void free_block(void* ptr) {
  if (!ptr) return;
  // A forked child must not call the runtime (CUDA refuses a forked child); its copy of the
  // mapping goes with the process.
  if (getpid() != g_owner_pid.load()) return;
  size_t n = 0;
  {
    std::lock_guard<std::mutex> g(g_sizes_mu);
    auto it = g_sizes.find(ptr);
    if (it != g_sizes.end()) n = it->second, g_sizes.erase(it);
  }
  musaError_t e = musaFreeHost(ptr);
  if (e != musaSuccess) TORCH_WARN("unified memory: musaFreeHost failed: ", musaGetErrorString(e));
  g_host.add(-static_cast<int64_t>(n));
  g_host_freed += static_cast<int64_t>(n);
}

class UnifiedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n) {
      musaError_t e = musaHostAlloc(&p, n, musaHostAllocPortable | musaHostAllocMapped);
      TORCH_CHECK(e == musaSuccess, "unified memory (PYTORCH_MUSA_ALLOC_CONF=cpu:unified or "
                  "torch_musa.use_unified_cpu_allocator()): allocating ", n, " bytes of mapped host memory failed: ",
                  musaGetErrorString(e), "; leave unified mode to allocate pageable CPU memory");
    }
    if (p) {
      std::lock_guard<std::mutex> g(g_sizes_mu);
      g_sizes[p] = n;
    }
    g_host.add(static_cast<int64_t>(n));
    g_host_allocated += static_cast<int64_t>(n);
    return {p, p, &free_block, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

UnifiedAllocator g_allocator;
std::mutex g_mu;
int g_depth = 0;
c10::Allocator* g_previous = nullptr;

// Keeps the CPU storage (and so its memory) alive while a musa view of it lives.
struct View {
  c10::Storage cpu;
  c10::DeviceIndex device;
  int64_t size;
};

void free_view(void* ctx) {
  auto* v = static_cast<View*>(ctx);
  g_views[v->device].add(-v->size);
  delete v;
}

int64_t checked(c10::DeviceIndex d) {
  TORCH_CHECK(d >= 0 && d < kMaxDevices, "unified memory: device index ", static_cast<int>(d), " is out of range");
  return d;
}

}  // namespace

c10::Allocator* unified_allocator() { return &g_allocator; }

// A child forked in unified mode (a DataLoader worker) allocates pageable memory: mapped memory
// would need the runtime, which a forked child cannot use. Single-threaded here: no locking.
void leave_in_child() {
  if (g_depth > 0) c10::SetAllocator(c10::DeviceType::CPU, g_previous, UINT8_MAX);
  g_depth = 0;
}

void unified_enter() {
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, &leave_in_child); });
  g_owner_pid = getpid();
  std::lock_guard<std::mutex> g(g_mu);
  if (g_depth++ == 0) {
    g_previous = c10::GetAllocator(c10::DeviceType::CPU);
    // Highest priority: the swap is undone by unified_exit, not by a later registration.
    c10::SetAllocator(c10::DeviceType::CPU, &g_allocator, UINT8_MAX);
  }
}

void unified_exit() {
  std::lock_guard<std::mutex> g(g_mu);
  TORCH_CHECK(g_depth > 0, "unified memory: exit without a matching enter");
  if (--g_depth == 0) c10::SetAllocator(c10::DeviceType::CPU, g_previous, UINT8_MAX);
}

int unified_depth() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_depth;
}

bool is_unified(const c10::Storage& s) { return s.data_ptr().get_deleter() == &free_block; }

c10::Storage unified_device_view(const c10::Storage& cpu, c10::DeviceIndex device) {
  TORCH_CHECK(is_unified(cpu), "unified memory: the storage was not allocated in unified mode; create it inside "
              "torch_musa.use_unified_cpu_allocator() (or with PYTORCH_MUSA_ALLOC_CONF=cpu:unified), or copy it with .to('musa')");
  checked(device);
  void* hptr = cpu.data_ptr().get_context();  // the allocation's start
  void* dptr = nullptr;
  if (hptr) MUSA_CHECK(musaHostGetDevicePointer(&dptr, hptr, 0));
  // (A storage's data pointer is the allocation's start: the view covers the same bytes.)
  TORCH_CHECK(cpu.data() == hptr, "unified memory: the storage does not start at its allocation");
  auto n = static_cast<int64_t>(cpu.nbytes());
  g_views[device].add(n);
  c10::DataPtr dp(dptr, new View{cpu, device, n}, &free_view, c10::Device(c10::DeviceType::PrivateUse1, device));
  return c10::Storage(c10::Storage::use_byte_size_t(), cpu.nbytes(), std::move(dp), nullptr, /*resizable=*/false);
}

UnifiedStats unified_stats(c10::DeviceIndex device) {
  auto& v = g_views[checked(device)];
  return {g_host.current.load(), g_host.peak.load(), g_host_allocated.load(), g_host_freed.load(),
          v.current.load(), v.peak.load()};
}

void reset_unified_peak(c10::DeviceIndex device) {
  g_host.peak.store(g_host.current.load());
  auto& v = g_views[checked(device)];
  v.peak.store(v.current.load());
}

namespace py = pybind11;

const c10::Storage& storage_arg(const py::handle& obj) {
  TORCH_CHECK(THPStorage_Check(obj.ptr()), "unified memory: expected a torch.UntypedStorage, got ",
              std::string(py::str(py::type::of(obj))));
  return THPStorage_Unpack(obj.ptr());
}

void bind_unified(py::module& m) {
  m.def("_unified_configured", [] { return allocator_config().cpu_unified; });
  m.def("_unified_enter", &unified_enter);
  m.def("_unified_exit", &unified_exit);
  m.def("_unified_depth", &unified_depth);
  m.def("_unified_is", [](py::handle s) { return is_unified(storage_arg(s)); });
  m.def("_unified_device_view", [](py::handle s, int device) {
    return py::reinterpret_steal<py::object>(
        THPStorage_Wrap(unified_device_view(storage_arg(s), static_cast<c10::DeviceIndex>(device))));
  });
  m.def("_unified_stats", [](int device) {
    UnifiedStats s = unified_stats(static_cast<c10::DeviceIndex>(device));
    py::dict d;
    d["host_current"] = s.host_current;
    d["host_peak"] = s.host_peak;
    d["host_allocated"] = s.host_allocated;
    d["host_freed"] = s.host_freed;
    d["view_current"] = s.view_current;
    d["view_peak"] = s.view_peak;
    return d;
  });
  m.def("_unified_reset_peak", [](int device) { reset_unified_peak(static_cast<c10::DeviceIndex>(device)); });
}

}  // namespace torch_musa::allocator
