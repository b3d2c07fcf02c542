#include "ipc/shared_memory.h"


#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "memory/caching_allocator.h"

namespace torch_musa::ipc {
namespace {

// Memory of an expandable segment travels as its physical extents: a tag, then per extent
// the shareable handle (musaMemExportToShareableHandle) and its size.
constexpr char kExtentsTag[] = "musa-extents";
constexpr size_t kTagLen = sizeof(kExtentsTag) - 1;
constexpr size_t kRecord = sizeof(musaIpcMemHandle_t) + sizeof(uint64_t);

bool is_extents(const std::string& handle) { return handle.compare(0, kTagLen, kExtentsTag) == 0; }

// One mapping of another process's allocation (or of its extents, mapped contiguously), shared by
// the storages over it.
struct OpenedAllocation {
  void* base = nullptr;
  size_t span = 0;  // extents only: the reserved range
  std::vector<std::pair<size_t, musaMemGenericAllocationHandle_t>> extents;  // (size, imported memory)
  ~OpenedAllocation() {
    if (!base) return;
    if (!span) {
      (void)musaIpcCloseMemHandle(base);
    } else {
      size_t at = 0;
      for (auto [size, h] : extents) {
        (void)musaMemUnmap(static_cast<char*>(base) + at, size);
        (void)musaMemRelease(h);
        at += size;
      }
      (void)musaMemAddressFree(base, span);
    }
    (void)musaGetLastError();
  }
};

void map_extents(OpenedAllocation& opened, const std::string& handle, c10::DeviceIndex device) {
  size_t n = (handle.size() - kTagLen) / kRecord;
  std::vector<std::pair<musaIpcMemHandle_t, size_t>> records(n);
  for (size_t i = 0; i < n; ++i) {
    const char* r = handle.data() + kTagLen + i * kRecord;
    std::memcpy(records[i].first.reserved, r, sizeof(musaIpcMemHandle_t));
    uint64_t size = 0;
    std::memcpy(&size, r + sizeof(musaIpcMemHandle_t), sizeof size);
    records[i].second = size;
    opened.span += size;
  }
  MUSA_CHECK(musaMemAddressReserve(&opened.base, opened.span, 0));
  size_t at = 0;
  for (auto& [shareable, size] : records) {
    musaMemGenericAllocationHandle_t h{};
    MUSA_CHECK(musaMemImportFromShareableHandle(&h, shareable));
    opened.extents.emplace_back(size, h);
    char* where = static_cast<char*>(opened.base) + at;
    MUSA_CHECK(musaMemMap(where, size, 0, h));
    MUSA_CHECK(musaMemSetAccess(where, size, device));
    at += size;
  }
}

// The handle of the allocation holding `storage`, and the storage's offset in it.
std::string export_memory(const c10::Storage& storage, int64_t* offset) {
  std::vector<allocator::BlockExtent> extents;
  size_t in_first = 0;
  if (allocator::expandable_extents(storage.data_ptr(), &extents, &in_first)) {
    std::string handle(kExtentsTag, kTagLen);
    for (const auto& e : extents) {
      musaIpcMemHandle_t h;
      MUSA_CHECK(musaMemExportToShareableHandle(&h, e.handle));
      uint64_t size = e.size;
      handle.append(h.reserved, sizeof h.reserved);
      handle.append(reinterpret_cast<const char*>(&size), sizeof size);
    }
    *offset = static_cast<int64_t>(in_first);
    return handle;
  }
  void* data = const_cast<void*>(storage.data());
  void* base = nullptr;
  size_t size = 0;
  MUSA_CHECK(musaMemGetAddressRange(&base, &size, data));
  *offset = static_cast<char*>(data) - static_cast<char*>(base);
  TORCH_CHECK(*offset + static_cast<int64_t>(storage.nbytes()) <= static_cast<int64_t>(size),
              "this musa storage spans more than the allocation that holds its start and cannot be sent to "
              "another process; send a copy (t.clone())");
  musaIpcMemHandle_t h;
  MUSA_CHECK(musaIpcGetMemHandle(&h, data));
  return std::string(h.reserved, sizeof h.reserved);
}

std::mutex g_open_mu;
std::map<std::string, std::weak_ptr<OpenedAllocation>> g_opened;  // by handle bytes

std::shared_ptr<OpenedAllocation> open_allocation(const std::string& handle, c10::DeviceIndex device) {
  std::lock_guard<std::mutex> g(g_open_mu);
  if (auto it = g_opened.find(handle); it != g_opened.end())
    if (auto alive = it->second.lock()) return alive;
  DeviceScope scope(device);
  auto opened = std::make_shared<OpenedAllocation>();
  if (is_extents(handle)) {
    map_extents(*opened, handle, device);
  } else {
    musaIpcMemHandle_t h;
    std::memcpy(h.reserved, handle.data(), sizeof h.reserved);
    MUSA_CHECK(musaIpcOpenMemHandle(&opened->base, h, musaIpcMemLazyEnablePeerAccess));
  }
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
  out.handle = export_memory(storage, &out.offset_bytes);

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
  TORCH_CHECK_VALUE(is_extents(s.handle) ? (s.handle.size() - kTagLen) % kRecord == 0
                                          : s.handle.size() == sizeof(musaIpcMemHandle_t),
                    "not a musa IPC memory handle (", s.handle.size(), " bytes)");
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
