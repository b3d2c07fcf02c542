#include "ipc/shared_memory.h"


#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"

namespace torch_musa::ipc {
namespace {

// One mapping of another process's allocation, shared by the storages over it.
struct OpenedAllocation {
  void* base = nullptr;
  ~OpenedAllocation() {
    if (base) (void)musaIpcCloseMemHandle(base), (void)musaGetLastError();
  }
};

std::mutex g_open_mu;
std::map<std::string, std::weak_ptr<OpenedAllocation>> g_opened;  // by handle bytes

std::shared_ptr<OpenedAllocation> open_allocation(const std::string& handle, c10::DeviceIndex device) {
  std::lock_guard<std::mutex> g(g_open_mu);
  if (auto it = g_opened.find(handle); it != g_opened.end())
    if (auto alive = it->second.lock()) return alive;
  musaIpcMemHandle_t h;
  std::memcpy(h.reserved, handle.data(), sizeof h.reserved);
  DeviceScope scope(device);
  auto opened = std::make_shared<OpenedAllocation>();
  MUSA_CHECK(musaIpcOpenMemHandle(&opened->base, h, musaIpcMemLazyEnablePeerAccess));
  g_opened[handle] = opened;
  return opened;
}

// What a received storage's memory holds: the mapping and the sender's slot.
struct ReceivedMemory {
  std::shared_ptr<OpenedAllocation> allocation;
  CounterSlot counter;
};

// Received memory still held, so exit can release it (storages may outlive finalization).
std::mutex g_live_mu;
std::set<ReceivedMemory*> g_live;

void release_received(void* ctx) {
  auto* r = static_cast<ReceivedMemory*>(ctx);
  // Work this process queued on the memory must finish before the sender may reuse it.
  if (r->allocation.use_count() == 1) (void)musaDeviceSynchronize(), (void)musaGetLastError();
  CounterSlot counter;
  {
    std::lock_guard<std::mutex> g(g_live_mu);
    g_live.erase(r);
    counter = r->counter;  // (slot -1 once released at exit)
  }
  delete r;  // unmaps with the last storage over the allocation
  release(counter);
}

}  // namespace

SharedStorage share(const c10::Storage& storage) {
  SharedStorage out;
  out.device = storage.device().index();
  out.nbytes = static_cast<int64_t>(storage.nbytes());
  if (out.nbytes == 0 || storage.data() == nullptr) return out;
  void* data = const_cast<void*>(storage.data());
  void* base = nullptr;
  size_t size = 0;
  MUSA_CHECK(musaMemGetAddressRange(&base, &size, data));
  out.offset_bytes = static_cast<char*>(data) - static_cast<char*>(base);
  TORCH_CHECK(out.offset_bytes + out.nbytes <= static_cast<int64_t>(size),
              "this musa storage spans several pieces of an expandable segment and cannot be sent to another "
              "process; set PYTORCH_MUSA_ALLOC_CONF=expandable_segments:False in the sending process, or send a "
              "copy (t.clone())");
  musaIpcMemHandle_t h;
  MUSA_CHECK(musaIpcGetMemHandle(&h, data));
  out.handle.assign(h.reserved, sizeof h.reserved);

  // The receiver waits for the work queued so far on the current stream (the cuda driver;
  // the host driver's work is complete when queued).
  musaEvent_t event = nullptr;
  if (!is_host_driver()) {
    DeviceScope scope(out.device);
    MUSA_CHECK(musaEventCreateWithFlags(&event, musaEventDisableTiming | musaEventInterprocess));
    MUSA_CHECK(musaEventRecord(event, native_stream(current_stream(out.device))));
    musaIpcEventHandle_t eh;
    MUSA_CHECK(musaIpcGetEventHandle(&eh, event));
    out.event_handle.assign(eh.reserved, sizeof eh.reserved);
  }
  out.counter = hold_for_receiver(storage, event);
  return out;
}

c10::Storage open(const SharedStorage& s) {
  c10::Device device(c10::DeviceType::PrivateUse1, s.device);
  if (s.handle.empty() || s.nbytes == 0) {
    release(s.counter);
    return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), 0,
                                                              c10::DataPtr(nullptr, device), nullptr, false));
  }
  TORCH_CHECK_VALUE(s.handle.size() == sizeof(musaIpcMemHandle_t), "a musa IPC memory handle has ",
                    sizeof(musaIpcMemHandle_t), " bytes, got ", s.handle.size());
  attach(s.counter);
  auto allocation = open_allocation(s.handle, s.device);
  if (!s.event_handle.empty()) {
    DeviceScope scope(s.device);
    musaIpcEventHandle_t eh;
    std::memcpy(eh.reserved, s.event_handle.data(), sizeof eh.reserved);
    musaEvent_t event = nullptr;
    MUSA_CHECK(musaIpcOpenEventHandle(&event, eh));
    MUSA_CHECK(musaStreamWaitEvent(native_stream(current_stream(s.device)), event, 0));
    MUSA_CHECK(musaEventDestroy(event));
  }
  void* data = static_cast<char*>(allocation->base) + s.offset_bytes;
  auto* received = new ReceivedMemory{std::move(allocation), s.counter};
  {
    std::lock_guard<std::mutex> g(g_live_mu);
    g_live.insert(received);
  }
  c10::DataPtr ptr(data, received, &release_received, device);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), s.nbytes,
                                                            std::move(ptr), nullptr, false));
}

void release_all_received() {
  std::lock_guard<std::mutex> g(g_live_mu);
  if (g_live.empty()) return;
  (void)musaDeviceSynchronize(), (void)musaGetLastError();
  for (ReceivedMemory* r : g_live) {
    release(r->counter);
    r->counter.slot = -1;
  }
}

}  // namespace torch_musa::ipc
