// The host driver: MUSA devices emulated in host memory.
//
// Design choice: work launched onto a stream runs inline, on the launching
// thread, in launch order. That trivially honours stream order and event
// waits, and every observable result (item(), cpu(), printing) sees finished
// work. While a stream is capturing, launched tasks are recorded into a graph
// instead of running; replaying the graph runs them in order.
//
// Device memory comes from mmap; each device has a capacity
// (TORCH_MUSA_HOST_MEMORY, default 8GiB) so out-of-memory is real.
#include "driver.h"
#include "host_clock.h"
#include "host_graph.h"
#include "host_ipc.h"
#include "host_memory_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace musa_rt {
namespace {

using host::Capture;
using host::HostGraph;
using host::HostGraphExec;
using host::Task;
using host::nowMs;
using host::sleepUntilMs;

constexpr size_t kDefaultCapacity = size_t(8) << 30;
constexpr int kDefaultDevices = 2;
constexpr size_t kGranularity = size_t(2) << 20;
constexpr size_t kPage = 4096;

size_t roundUp(size_t n, size_t m) { return (n + m - 1) / m * m; }

std::string human(size_t bytes) {
  char buf[64];
  if (bytes >= (size_t(1) << 30))
    snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(size_t(1) << 30));
  else
    snprintf(buf, sizeof buf, "%.2f MiB", bytes / double(size_t(1) << 20));
  return buf;
}

struct PhysicalMemory {
  int fd;
  size_t offset;  // within fd
  size_t size;
  int device;
  bool owns_fd;   // a standalone memfd (the pool was too fragmented), or an imported file
  int generation = 0;  // of the pool's file (host_memory_pool.h)
  bool imported = false;  // another process's memory (musaMemImportFromShareableHandle): not ours to count
  int mappings = 0;
  bool released = false;
};

struct Device {
  size_t capacity = kDefaultCapacity;
  size_t used = 0;  // guarded by HostDriver::mu_
  // Device memory (musaMalloc and VMM's physical memory) comes from one
  // sparse memfd per device (host_memory_pool.h).
  MemfdPool pool;
};

class HostDriver final : public Driver {
  struct Range {
    size_t size;
    int device;
    musaMemGenericAllocationHandle_t handle = 0;
    int fd = -1;             // the file the range maps (allocations and VMM mappings)
    size_t file_offset = 0;  // where in it
    bool owns_fd = false;    // a file of its own, not the device's pool
    int generation = 0;      // of the pool's file (host_memory_pool.h)
  };

  // Gives an allocation's file range back (the pool's pages, or its own file).
  void releaseFile(const Range& r) {
    if (r.fd < 0) return;
    if (r.owns_fd) close(r.fd);
    else returnToPool(r.device, r.file_offset, r.size, r.generation);
  }


 public:
  HostDriver(int count, size_t capacity) : devices_(count), clock_(count) {
    for (auto& d : devices_) d.capacity = capacity;
  }

  const char* name() const override { return "host"; }
  int deviceCount() override { return static_cast<int>(devices_.size()); }

  musaError_t properties(int dev, musaDeviceProp* p) override {
    snprintf(p->name, sizeof p->name, "MUSA Host Emulated Device %d", dev);
    p->totalGlobalMem = devices_[dev].capacity;
    unsigned hw = std::thread::hardware_concurrency();
    p->multiProcessorCount = hw ? static_cast<int>(hw) : 1;
    // Reported as MUSA architecture 3.1 (mp_31), the first with native FP8:
    // the host driver emulates FP8, and code gating FP8 on (3, 1) takes its path.
    p->major = 3;
    p->minor = 1;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->l2CacheSize = size_t(8) << 20;
    p->isHostEmulated = 1;
    p->maxThreadsPerMultiProcessor = 2048;
    p->regsPerMultiprocessor = 65536;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerMultiprocessor = 128 << 10;
    p->sharedMemPerBlockOptin = 128 << 10;
    p->clockRate = 1000000;  // 1 GHz, in kHz
    p->memoryClockRate = 1000000;
    p->memoryBusWidth = 64;  // one host memory channel
    p->pciBusID = dev;       // a distinct (emulated) location per device
    p->pciDeviceID = 0;
    p->pciDomainID = 0;
    p->isMultiGpuBoard = 0;
    p->integrated = 1;  // its memory is the CPU's
    snprintf(p->uuid, sizeof p->uuid, "00000000-0000-4000-8000-%012d", dev);
    return musaSuccess;
  }

  musaError_t setDevice(int) override { return musaSuccess; }
  musaError_t deviceSynchronize(int dev) override {
    if (auto e = prohibited(nullptr, "device synchronization (torch.musa.synchronize())", /*conflicts=*/true)) return e;
    sleepUntilMs(clock_.deviceReadyAt(dev));
    return musaSuccess;
  }
  void priorityRange(int* least, int* greatest) override {
    *least = 0;
    *greatest = -2;  // three levels like CUDA on recent GPUs: 0, -1, -2
  }

  // ---- memory ----
  musaError_t reserveCapacity(int dev, size_t size) {
    Device& d = devices_[dev];
    if (d.used + size > d.capacity) {
      return fail(musaErrorMemoryAllocation,
                  "out of memory on musa device " + std::to_string(dev) + ": tried to allocate " +
                      human(size) + ", " + human(d.capacity - d.used) + " free of " +
                      human(d.capacity) + " (raise TORCH_MUSA_HOST_MEMORY to emulate a larger device)");
    }
    d.used += size;
    return musaSuccess;
  }

  // Device memory is a shared mapping of the device's memfd pool (or of a file
  // of its own when the pool is too fragmented), so it can be shared with
  // another process (host_ipc.h) without a copy.
  musaError_t malloc(int dev, void** ptr, size_t size) override {
    size_t rounded = roundUp(size, kPage);
    Range r{rounded, dev};
    {
      std::lock_guard<std::mutex> g(mu_);
      if (auto e = reserveCapacity(dev, rounded)) return e;
      if (!carveFromPool(dev, rounded, &r.fd, &r.file_offset, &r.generation)) {
        r.fd = memfd_create("musa-memory", MFD_CLOEXEC);
        r.owns_fd = true;
        if (r.fd >= 0 && ftruncate(r.fd, static_cast<off_t>(rounded)) != 0) {
          close(r.fd);
          r.fd = -1;
        }
      }
    }
    void* p = r.fd < 0 ? MAP_FAILED
                       : mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd,
                              static_cast<off_t>(r.file_offset));
    std::lock_guard<std::mutex> g(mu_);
    if (p == MAP_FAILED) {
      int err = errno;
      releaseFile(r);
      devices_[dev].used -= rounded;
      return fail(musaErrorMemoryAllocation,
                  "the host could not map " + human(rounded) + " for musa device " +
                      std::to_string(dev) + ": " + strerror(err));
    }
    allocations_[reinterpret_cast<uintptr_t>(p)] = r;
    *ptr = p;
    return musaSuccess;
  }

  musaError_t free(void* ptr) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end())
      return fail(musaErrorInvalidValue, "musaFree: pointer was not returned by musaMalloc");
    munmap(ptr, it->second.size);
    releaseFile(it->second);
    devices_[it->second.device].used -= it->second.size;
    allocations_.erase(it);
    return musaSuccess;
  }

  musaError_t memGetInfo(int dev, size_t* free, size_t* total) override {
    std::lock_guard<std::mutex> g(mu_);
    *total = devices_[dev].capacity;
    *free = devices_[dev].capacity - devices_[dev].used;
    return musaSuccess;
  }

  // Device memory is host memory here: every pinned allocation is mapped.
  musaError_t hostAlloc(void** ptr, size_t size, unsigned) override {
    void* p = nullptr;
    if (posix_memalign(&p, 64, size) != 0 || !p)
      return fail(musaErrorMemoryAllocation, "pinned host allocation of " + human(size) + " failed");
    std::lock_guard<std::mutex> g(mu_);
    pinned_[reinterpret_cast<uintptr_t>(p)] = size;
    *ptr = p;
    return musaSuccess;
  }

  musaError_t hostGetDevicePointer(void** device_ptr, void* host_ptr) override {
    std::lock_guard<std::mutex> g(mu_);
    auto h = reinterpret_cast<uintptr_t>(host_ptr);
    auto it = pinned_.upper_bound(h);
    if (it == pinned_.begin() || h >= std::prev(it)->first + std::prev(it)->second)
      return fail(musaErrorInvalidValue, "musaHostGetDevicePointer: pointer was not returned by musaHostAlloc");
    *device_ptr = host_ptr;  // the devices address host memory directly
    return musaSuccess;
  }

  musaError_t hostFree(void* ptr) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = pinned_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == pinned_.end())
      return fail(musaErrorInvalidValue, "musaFreeHost: pointer was not returned by musaHostAlloc");
    std::free(ptr);
    pinned_.erase(it);
    return musaSuccess;
  }

  // Finds the range in `m` (start -> {size, ...}) that contains `p`.
  template <typename Map>
  static typename Map::const_iterator containing(const Map& m, uintptr_t p) {
    auto it = m.upper_bound(p);
    if (it == m.begin()) return m.end();
    --it;
    return p < it->first + it->second.size ? it : m.end();
  }

  musaError_t pointerAttributes(const void* ptr, musaPointerAttributes* a) override {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> g(mu_);
    auto it = containing(allocations_, p);
    if (it != allocations_.end()) {
      *a = {musaMemoryTypeDevice, it->second.device};
      return musaSuccess;
    }
    auto mt = containing(mappings_, p);
    if (mt != mappings_.end()) {
      *a = {musaMemoryTypeDevice, mt->second.device};
      return musaSuccess;
    }
    auto ot = containing(ipc_opened_, p);
    if (ot != ipc_opened_.end()) {
      *a = {musaMemoryTypeDevice, ot->second.device};
      return musaSuccess;
    }
    auto pt = pinned_.upper_bound(p);
    if (pt != pinned_.begin()) {
      --pt;
      if (p < pt->first + pt->second) {
        *a = {musaMemoryTypeHost, -1};
        return musaSuccess;
      }
    }
    *a = {musaMemoryTypeUnregistered, -1};
    return musaSuccess;
  }

  musaError_t memcpy(void* dst, const void* src, size_t n, musaMemcpyKind, MUstream_st* s) override {
    if (!s)
      if (auto e = prohibited(nullptr, "a blocking copy (musaMemcpy; e.g. .item() or .cpu())", false)) return e;
    return run(s, [=] { std::memmove(dst, src, n); }, "memcpy");
  }

  musaError_t memset(void* dst, int value, size_t n, MUstream_st* s) override {
    if (!s)
      if (auto e = prohibited(nullptr, "a blocking memset (musaMemset)", false)) return e;
    return run(s, [=] { std::memset(dst, value, n); }, "memset");
  }

  // ---- virtual memory ----
  musaError_t granularity(int, size_t* g) override {
    *g = kGranularity;
    return musaSuccess;
  }

  musaError_t addressReserve(void** ptr, size_t size, size_t alignment) override {
    size_t align = std::max(alignment, kGranularity);
    if (size % kGranularity)
      return fail(musaErrorInvalidValue, "reserved size must be a multiple of the granularity (2 MiB)");
    size_t span = size + align;
    void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
      return fail(musaErrorMemoryAllocation, "could not reserve " + human(size) + " of address space");
    uintptr_t start = roundUp(reinterpret_cast<uintptr_t>(raw), align);
    // Trim the unaligned head and tail so only [start, start+size) stays reserved.
    if (start > reinterpret_cast<uintptr_t>(raw)) munmap(raw, start - reinterpret_cast<uintptr_t>(raw));
    uintptr_t end = reinterpret_cast<uintptr_t>(raw) + span;
    if (end > start + size) munmap(reinterpret_cast<void*>(start + size), end - (start + size));
    std::lock_guard<std::mutex> g(mu_);
    reservations_[start] = {size, -1};
    *ptr = reinterpret_cast<void*>(start);
    return musaSuccess;
  }

  musaError_t addressFree(void* ptr, size_t size) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = reservations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == reservations_.end() || it->second.size != size)
      return fail(musaErrorInvalidValue, "musaMemAddressFree: no reservation of that address and size");
    auto first = mappings_.lower_bound(it->first);
    if (first != mappings_.end() && first->first < it->first + size)
      return fail(musaErrorInvalidValue, "musaMemAddressFree: the range still has mapped memory; unmap it first");
    munmap(ptr, size);
    reservations_.erase(it);
    return musaSuccess;
  }

  musaError_t memCreate(musaMemGenericAllocationHandle_t* h, size_t size, int dev) override {
    if (size % kGranularity)
      return fail(musaErrorInvalidValue, "physical allocation size must be a multiple of the granularity (2 MiB)");
    std::lock_guard<std::mutex> g(mu_);
    if (auto e = reserveCapacity(dev, size)) return e;
    PhysicalMemory pm{-1, 0, size, dev, false};
    if (!carveFromPool(dev, size, &pm.fd, &pm.offset, &pm.generation)) {
      pm.fd = memfd_create("musa-physical", MFD_CLOEXEC);
      pm.owns_fd = true;
      if (pm.fd < 0 || ftruncate(pm.fd, static_cast<off_t>(size)) != 0) {
        if (pm.fd >= 0) close(pm.fd);
        devices_[dev].used -= size;
        return fail(musaErrorMemoryAllocation, std::string("memfd_create failed: ") + strerror(errno));
      }
    }
    musaMemGenericAllocationHandle_t id = ++next_handle_;
    physical_[id] = pm;
    *h = id;
    return musaSuccess;
  }

  bool carveFromPool(int dev, size_t size, int* fd, size_t* offset, int* generation) {
    return devices_[dev].pool.carve(roundUp(devices_[dev].capacity, kGranularity), size, fd, offset, generation);
  }
  void returnToPool(int dev, size_t offset, size_t size, int generation) {
    devices_[dev].pool.giveBack(offset, size, generation);
  }

  void maybeDropPhysical(musaMemGenericAllocationHandle_t id) {
    auto& pm = physical_[id];
    if (pm.released && pm.mappings == 0) {
      if (pm.owns_fd) close(pm.fd);
      else returnToPool(pm.device, pm.offset, pm.size, pm.generation);
      if (!pm.imported) devices_[pm.device].used -= pm.size;
      physical_.erase(id);
    }
  }

  musaError_t memRelease(musaMemGenericAllocationHandle_t h) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = physical_.find(h);
    if (it == physical_.end() || it->second.released)
      return fail(musaErrorInvalidValue, "musaMemRelease: unknown or already released handle");
    it->second.released = true;
    maybeDropPhysical(h);
    return musaSuccess;
  }

  musaError_t memExport(musaIpcMemHandle_t* shareable, musaMemGenericAllocationHandle_t h) override {
    std::lock_guard<std::mutex> g(mu_);
    auto pm = physical_.find(h);
    if (pm == physical_.end() || pm->second.released)
      return fail(musaErrorInvalidValue, "musaMemExportToShareableHandle: unknown physical memory handle");
    if (pm->second.imported)
      return fail(musaErrorInvalidValue,
                  "musaMemExportToShareableHandle: the memory was imported from another process; export it there");
    return hostIpcExport({pm->second.fd, pm->second.offset, pm->second.size, pm->second.device}, shareable);
  }

  musaError_t memImport(int, musaMemGenericAllocationHandle_t* h, const musaIpcMemHandle_t& shareable) override {
    HostIpcRange range{};
    if (auto e = hostIpcOpen(shareable, &range))
      return fail(e, std::string("musaMemImportFromShareableHandle: ") + musaGetLastErrorMessage());
    std::lock_guard<std::mutex> g(mu_);
    PhysicalMemory pm{range.fd, range.offset, range.size, range.device, /*owns_fd=*/true};
    pm.imported = true;
    musaMemGenericAllocationHandle_t id = ++next_handle_;
    physical_[id] = pm;
    *h = id;
    return musaSuccess;
  }

  musaError_t memMap(void* ptr, size_t size, size_t offset, musaMemGenericAllocationHandle_t h) override {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> g(mu_);
    auto pm = physical_.find(h);
    if (pm == physical_.end() || pm->second.released)
      return fail(musaErrorInvalidValue, "musaMemMap: unknown physical memory handle");
    if (offset + size > pm->second.size || size % kGranularity || p % kGranularity ||
        offset % kGranularity)
      return fail(musaErrorInvalidValue, "musaMemMap: range is not granularity-aligned or exceeds the physical allocation");
    auto rt = containing(reservations_, p);
    if (rt == reservations_.end() || p + size > rt->first + rt->second.size)
      return fail(musaErrorInvalidValue, "musaMemMap: the range lies outside any reserved address range");
    auto next = mappings_.lower_bound(p);
    if ((next != mappings_.end() && next->first < p + size) || containing(mappings_, p) != mappings_.end())
      return fail(musaErrorInvalidValue, "musaMemMap: the range overlaps an existing mapping");
    void* r = mmap(ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, pm->second.fd,
                   static_cast<off_t>(pm->second.offset + offset));
    if (r == MAP_FAILED) return fail(musaErrorMemoryAllocation, std::string("mmap failed: ") + strerror(errno));
    pm->second.mappings++;
    mappings_[p] = {size, pm->second.device, h, pm->second.fd, pm->second.offset + offset};
    return musaSuccess;
  }

  musaError_t memUnmap(void* ptr, size_t size) override {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> g(mu_);
    auto it = mappings_.find(p);
    if (it == mappings_.end() || it->second.size != size)
      return fail(musaErrorInvalidValue, "musaMemUnmap: no mapping starts at that address with that size");
    // Put the reservation back in place of the mapping.
    mmap(ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    auto h = it->second.handle;
    mappings_.erase(it);
    physical_[h].mappings--;
    maybeDropPhysical(h);
    return musaSuccess;
  }

  musaError_t memSetAccess(void* ptr, size_t size, int) override {
    auto p = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> g(mu_);
    // Only mapped memory may be made accessible: mprotect on anything else would
    // expose bare reserved address space or change unrelated host memory.
    for (uintptr_t q = p; q < p + size;) {
      auto it = containing(mappings_, q);
      if (it == mappings_.end())
        return fail(musaErrorInvalidValue, "musaMemSetAccess: the range is not entirely mapped");
      q = it->first + it->second.size;
    }
    if (mprotect(ptr, size, PROT_READ | PROT_WRITE) != 0)
      return fail(musaErrorInvalidValue, std::string("musaMemSetAccess: ") + strerror(errno));
    return musaSuccess;
  }

  // ---- sharing between processes (host_ipc.h) ----
  // The allocation or VMM mapping holding `p`, or an opened IPC mapping.
  const std::pair<const uintptr_t, Range>* rangeOf(uintptr_t p, bool* opened) {
    *opened = false;
    auto it = containing(allocations_, p);
    if (it != allocations_.end()) return &*it;
    it = containing(mappings_, p);
    if (it != mappings_.end()) return &*it;
    it = containing(ipc_opened_, p);
    if (it != ipc_opened_.end()) {
      *opened = true;
      return &*it;
    }
    return nullptr;
  }

  musaError_t memGetAddressRange(const void* ptr, void** base, size_t* size) override {
    std::lock_guard<std::mutex> g(mu_);
    bool opened = false;
    auto* r = rangeOf(reinterpret_cast<uintptr_t>(ptr), &opened);
    if (!r) return fail(musaErrorInvalidValue, "musaMemGetAddressRange: the pointer is not musa device memory");
    *base = reinterpret_cast<void*>(r->first);
    *size = r->second.size;
    return musaSuccess;
  }

  musaError_t ipcGetMemHandle(musaIpcMemHandle_t* h, void* ptr) override {
    std::lock_guard<std::mutex> g(mu_);
    bool opened = false;
    auto* r = rangeOf(reinterpret_cast<uintptr_t>(ptr), &opened);
    if (!r) return fail(musaErrorInvalidValue, "musaIpcGetMemHandle: the pointer is not musa device memory");
    if (opened)
      return fail(musaErrorInvalidValue,
                  "musaIpcGetMemHandle: the memory was itself opened from another process's handle; share it "
                  "from the process that allocated it");
    return hostIpcExport({r->second.fd, r->second.file_offset, r->second.size, r->second.device}, h);
  }

  musaError_t ipcOpenMemHandle(int, void** ptr, const musaIpcMemHandle_t& h) override {
    HostIpcRange range{};
    if (auto e = hostIpcMap(h, ptr, &range))
      return fail(e, std::string("musaIpcOpenMemHandle: ") + musaGetLastErrorMessage());
    std::lock_guard<std::mutex> g(mu_);
    ipc_opened_[reinterpret_cast<uintptr_t>(*ptr)] = {range.size, range.device};
    return musaSuccess;
  }

  musaError_t ipcCloseMemHandle(void* ptr) override {
    std::lock_guard<std::mutex> g(mu_);
    auto it = ipc_opened_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == ipc_opened_.end())
      return fail(musaErrorInvalidValue, "musaIpcCloseMemHandle: the pointer was not returned by musaIpcOpenMemHandle");
    munmap(ptr, it->second.size);
    ipc_opened_.erase(it);
    return musaSuccess;
  }

  musaError_t ipcGetEventHandle(musaIpcEventHandle_t* h, MUevent_st* e) override {
    if (auto err = captured_event(e, "musaIpcGetEventHandle")) return err;
    hostIpcExportEvent(e->device, h);
    return musaSuccess;
  }

  musaError_t ipcOpenEventHandle(MUevent_st* e, const musaIpcEventHandle_t& h) override {
    if (auto err = hostIpcOpenEvent(h, &e->device)) return err;
    e->flags = musaEventInterprocess | musaEventDisableTiming;
    return eventCreate(e);
  }

  // ---- streams ----
  musaError_t streamCreate(MUstream_st*) override { return musaSuccess; }
  musaError_t streamWrap(MUstream_st*, void*) override {
    return fail(musaErrorNotSupported,
                "the host driver has no native streams to wrap; pass a musaStream_t made by "
                "musaStreamCreate instead");
  }
  musaError_t streamDestroy(MUstream_st* s) override {
    if (s->capture) return fail(musaErrorStreamCaptureUnsupported, "cannot destroy a capturing stream");
    return musaSuccess;
  }
  musaError_t streamQuery(MUstream_st* s) override {
    if (auto e = prohibited(s, "querying a stream (stream.query())", false)) return e;
    return clock_.readyAt(s) > nowMs() ? musaErrorNotReady : musaSuccess;
  }
  musaError_t streamSynchronize(MUstream_st* s) override {
    if (auto e = prohibited(s, "stream synchronization (stream.synchronize())", false)) return e;
    sleepUntilMs(clock_.readyAt(s));
    return musaSuccess;
  }
  musaError_t streamSpin(MUstream_st* s, unsigned long long cycles) override {
    if (s->capture) return run(s, [] {}, "spin");  // a replay is not held back
    clock_.hold(s, cycles * 1e-6);  // at the 1 GHz clock properties() reports
    return musaSuccess;
  }
  musaError_t streamWaitEvent(MUstream_st* s, MUevent_st* e) override {
    // Inline execution: the event's work is already done (unless a spin holds it
    // back: `s` then waits for it). What remains is the capture bookkeeping: waiting
    // on an event recorded in a capture joins that capture (a fork), or marks a
    // member's work as joined.
    std::lock_guard<std::mutex> g(mu_);
    auto* c = static_cast<Capture*>(e->capture);
    if (!c || !is_active(c)) {
      if (e->recorded && !s->capture) clock_.waitFor(s, e->time_ms);
      return musaSuccess;
    }
    auto rec = c->events.find(e);
    if (s->capture && s->capture != c) {
      static_cast<Capture*>(s->capture)->invalidated = true;
      return fail(musaErrorStreamCaptureInvalidated,
                  "a stream capturing one graph waited on an event of another capture; captures cannot be merged");
    }
    if (!s->capture) {
      s->capture = c;
      c->members[s];
    }
    if (rec != c->events.end() && rec->second.first != s) {
      auto& m = c->members[rec->second.first];
      m.joined = std::max(m.joined, rec->second.second);
    }
    return musaSuccess;
  }

  musaError_t launchTask(MUstream_st* s, std::function<void()> task, const char* name) override {
    return run(s, std::move(task), name);
  }

  // ---- events ----
  musaError_t eventCreate(MUevent_st*) override { return musaSuccess; }
  musaError_t eventDestroy(MUevent_st* e) override {
    std::lock_guard<std::mutex> g(mu_);
    for (Capture* c : active_) c->events.erase(e);
    return musaSuccess;
  }
  musaError_t eventRecord(MUevent_st* e, MUstream_st* s) override {
    if (s->capture) {
      std::lock_guard<std::mutex> g(mu_);
      // As in CUDA, recording an event in a capture adds no node: it only
      // marks a point other streams of the capture can depend on.
      auto* c = static_cast<Capture*>(s->capture);
      c->events[e] = {s, c->members[s].tasks};
      e->capture = c;
      return musaSuccess;
    }
    e->capture = nullptr;
    e->time_ms = std::max(nowMs(), clock_.readyAt(s));  // when the work before it completes
    e->recorded = true;
    return musaSuccess;
  }
  musaError_t eventQuery(MUevent_st* e) override {
    if (auto err = captured_event(e, "musaEventQuery")) return err;
    if (auto err = prohibited(nullptr, "querying an event (event.query())", false)) return err;
    return e->recorded && e->time_ms > nowMs() ? musaErrorNotReady : musaSuccess;
  }
  musaError_t eventSynchronize(MUevent_st* e) override {
    if (auto err = captured_event(e, "musaEventSynchronize")) return err;
    if (auto err = prohibited(nullptr, "event synchronization (event.synchronize())", false)) return err;
    if (e->recorded) sleepUntilMs(e->time_ms);
    return musaSuccess;
  }
  musaError_t eventElapsed(float* ms, MUevent_st* a, MUevent_st* b) override {
    *ms = static_cast<float>(b->time_ms - a->time_ms);
    return musaSuccess;
  }

  // ---- capture ----
  musaError_t beginCapture(MUstream_st* s, musaStreamCaptureMode mode) override {
    if (s->capture) return fail(musaErrorStreamCaptureUnsupported, "the stream is already capturing");
    auto* c = new Capture{new HostGraph(), s, mode, std::this_thread::get_id()};
    c->members[s];
    std::lock_guard<std::mutex> g(mu_);
    c->id = ++last_capture_id_;
    s->capture = c;
    active_.push_back(c);
    num_active_.store(static_cast<int>(active_.size()), std::memory_order_release);
    return musaSuccess;
  }
  musaError_t endCapture(MUstream_st* s, MUgraph_st** graph) override {
    *graph = nullptr;
    std::unique_lock<std::mutex> g(mu_);
    auto* c = static_cast<Capture*>(s->capture);
    if (!c) return fail(musaErrorStreamCaptureUnmatched, "the stream is not capturing");
    if (c->origin != s)
      return fail(musaErrorStreamCaptureUnmatched,
                  "the capture must end on the stream it began on, not on a stream that joined it");
    std::string unjoined;
    for (auto& [m, st] : c->members)
      if (m != s && st.tasks > st.joined) unjoined = "a side stream";
    for (auto& [m, st] : c->members) m->capture = nullptr;
    active_.erase(std::find(active_.begin(), active_.end(), c));
    num_active_.store(static_cast<int>(active_.size()), std::memory_order_release);
    for (auto& [e, rec] : c->events)
      if (e->capture == c) e->capture = nullptr;
    g.unlock();
    std::unique_ptr<Capture> owned(c);
    std::unique_ptr<HostGraph> hg(c->graph);
    if (c->invalidated)
      return fail(musaErrorStreamCaptureInvalidated,
                  "the capture was invalidated by " + (c->why.empty() ? std::string("an operation not permitted during capture") : c->why) +
                      "; nothing was recorded");
    if (!unjoined.empty())
      return fail(musaErrorStreamCaptureUnjoined,
                  "work captured on " + unjoined + " was not joined back into the capturing stream; make the capturing "
                  "stream wait for it (capture_stream.wait_stream(side_stream)) before ending the capture");
    *graph = hg.release();
    return musaSuccess;
  }
  bool anyCapturing() const override { return num_active_.load(std::memory_order_acquire) > 0; }
  musaError_t isCapturing(MUstream_st* s, musaStreamCaptureStatus* st) override {
    // Asked for every op: a stream that is not capturing needs no lock (as run() reads it).
    if (!s->capture) {
      *st = musaStreamCaptureStatusNone;
      return musaSuccess;
    }
    std::lock_guard<std::mutex> g(mu_);
    *st = !s->capture ? musaStreamCaptureStatusNone
                      : (static_cast<Capture*>(s->capture)->invalidated ? musaStreamCaptureStatusInvalidated
                                                                         : musaStreamCaptureStatusActive);
    return musaSuccess;
  }
  musaError_t invalidateCapture(MUstream_st* s, const std::string& why) override {
    std::lock_guard<std::mutex> g(mu_);
    auto* c = static_cast<Capture*>(s->capture);
    if (!c) return fail(musaErrorStreamCaptureUnmatched, "musaStreamInvalidateCapture: the stream is not capturing");
    c->invalidated = true;
    if (c->why.empty()) c->why = why;
    return musaSuccess;
  }
  musaError_t captureInfo(MUstream_st* s, musaStreamCaptureStatus* st, unsigned long long* id) override {
    std::lock_guard<std::mutex> g(mu_);
    auto* c = static_cast<Capture*>(s->capture);
    *st = !c ? musaStreamCaptureStatusNone : (c->invalidated ? musaStreamCaptureStatusInvalidated : musaStreamCaptureStatusActive);
    *id = c ? c->id : 0;
    return musaSuccess;
  }
  musaError_t graphInstantiate(MUgraphExec_st** exec, MUgraph_st* graph) override {
    auto* e = new HostGraphExec();
    e->tasks = static_cast<HostGraph*>(graph)->tasks;
    *exec = e;
    return musaSuccess;
  }
  musaError_t graphLaunch(MUgraphExec_st* exec, MUstream_st* s) override {
    auto& tasks = static_cast<HostGraphExec*>(exec)->tasks;
    if (s->capture) {  // a graph launched into a capture becomes part of it
      for (auto& t : tasks)
        if (auto e = run(s, t.fn, t.name.c_str())) return e;
      return musaSuccess;
    }
    for (auto& t : tasks) t.fn();  // in place: replay copies no task
    return musaSuccess;
  }

 private:
  // Runs a task now, or records it when the stream is capturing. A null
  // stream means a blocking call (musaMemcpy, musaMemset): it runs at once.
  musaError_t run(MUstream_st* s, std::function<void()> fn, const char* name) {
    if (s && s->capture) {
      std::lock_guard<std::mutex> g(mu_);
      auto* c = static_cast<Capture*>(s->capture);
      c->graph->tasks.push_back({std::move(fn), name});
      c->members[s].tasks++;
      return musaSuccess;
    }
    fn();
    return musaSuccess;
  }

  bool is_active(Capture* c) const { return std::find(active_.begin(), active_.end(), c) != active_.end(); }

  // Whether `what` may run now. It always conflicts with a capture of `s`
  // (the stream itself) and, when `conflicts` (a device synchronization waits
  // for every stream), with every capture, from any thread; otherwise the
  // captures' modes decide: global forbids it from any
  // thread, thread_local from the capturing thread, relaxed never. A capture
  // that forbids the call is invalidated, as CUDA does.
  musaError_t prohibited(MUstream_st* s, const char* what, bool conflicts) {
    std::lock_guard<std::mutex> g(mu_);
    auto me = std::this_thread::get_id();
    for (Capture* c : active_) {
      bool mine = c->thread == me;
      bool on_stream = s && s->capture == c;
      bool forbids = on_stream || conflicts || c->mode == musaStreamCaptureModeGlobal ||
                     (c->mode == musaStreamCaptureModeThreadLocal && mine);
      if (!forbids) continue;
      c->invalidated = true;
      if (c->why.empty()) c->why = std::string(what) + (mine || on_stream ? "" : " on another thread");
      std::string hint = mine || on_stream ? " (end it, then capture again without it)"
                                           : " (a global-mode capture forbids it on every thread: wait for the "
                                             "capture to end, or capture with capture_error_mode='thread_local' "
                                             "or 'relaxed')";
      return fail(musaErrorStreamCaptureUnsupported, std::string(what) +
                                                         " is not permitted while a stream is capturing; the "
                                                         "capture is now invalidated" + hint);
    }
    return musaSuccess;
  }

  // Events last recorded in a capture have no completion to query or wait for.
  musaError_t captured_event(MUevent_st* e, const char* call) {
    std::lock_guard<std::mutex> g(mu_);
    auto* c = static_cast<Capture*>(e->capture);
    if (!c || !is_active(c)) return musaSuccess;
    c->invalidated = true;
    if (c->why.empty()) c->why = std::string(call) + " on an event recorded in the capture";
    return fail(musaErrorCapturedEvent, std::string(call) +
                                            ": the event was last recorded in a capturing stream; the capture is "
                                            "now invalidated (wait on it with stream.wait_event instead)");
  }

  std::mutex mu_;
  std::vector<Device> devices_;
  host::StreamClock clock_;  // after devices_: sized by their count
  std::map<uintptr_t, Range> allocations_;
  std::map<uintptr_t, size_t> pinned_;
  std::map<uintptr_t, Range> reservations_;
  std::map<uintptr_t, Range> mappings_;
  std::map<uintptr_t, Range> ipc_opened_;  // other processes' memory mapped here
  std::map<musaMemGenericAllocationHandle_t, PhysicalMemory> physical_;
  musaMemGenericAllocationHandle_t next_handle_ = 0;
  std::vector<Capture*> active_;  // guarded by mu_
  std::atomic<int> num_active_{0};  // active_.size(), read without mu_ (anyCapturing)
  unsigned long long last_capture_id_ = 0;
};

}  // namespace

std::unique_ptr<Driver> makeHostDriver(std::string* why) {
  int count = kDefaultDevices;
  if (const char* e = std::getenv("TORCH_MUSA_HOST_DEVICES")) {
    char* end = nullptr;
    long v = std::strtol(e, &end, 10);
    if (end == e || *end != '\0' || v < 1 || v > 64) {
      *why = std::string("TORCH_MUSA_HOST_DEVICES='") + e +
             "' is not a device count; use a whole number from 1 to 64";
      return nullptr;
    }
    count = static_cast<int>(v);
  }
  size_t capacity = kDefaultCapacity;
  if (const char* e = std::getenv("TORCH_MUSA_HOST_MEMORY")) {
    if (!parseByteSize(e, &capacity) || capacity < kGranularity) {
      *why = std::string("TORCH_MUSA_HOST_MEMORY='") + e +
             "' is not a memory size; use e.g. 16GiB, 512MiB or a byte count of at least 2MiB";
      return nullptr;
    }
  }
  return std::make_unique<HostDriver>(count, capacity);
}

}  // namespace musa_rt
