// The cuda driver: MUSA devices are NVIDIA GPUs, driven through the CUDA
// runtime API. It is a plugin (libmusa_cuda_driver.so) that the front end
// dlopens, so libmusart itself never depends on CUDA.
//
// Behaviour callers should know:
// - Device indices are physical CUDA ordinals. Every call makes the device it
//   touches current (DeviceGuard) and switches back afterwards.
// - The front end's per-device default stream is a real cudaStreamNonBlocking
//   stream, not the legacy stream 0, so torch can adopt it as its current
//   stream. Blocking memcpy/memset (null stream) run on the working device's
//   default stream and wait for it, so they are ordered after work queued
//   there; nothing synchronizes implicitly with the legacy stream.
// - Virtual memory uses the CUDA driver API, reached through
//   cudaGetDriverEntryPoint*, so this library never links libcuda itself.
// - Capture maps musaStreamCaptureMode onto cudaStreamCaptureMode (global by default).
// - Tasks (musaLaunchTask) run on a CUDA callback thread and, like any
//   cudaLaunchHostFunc callback, must not call into the MUSA/CUDA runtime.
#include "cuda_graph.h"
#include "cuda_shareable.h"
#include "cuda_support.h"
#include "driver.h"

#include <cuda.h>  // types only: driver functions come from entry points
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace musa_rt {
namespace {
using namespace cuda_support;

using cuda::Capture;
using cuda::CudaGraph;
using cuda::CudaGraphExec;
using cuda::runCapturedTask;
using cuda::runTaskOnce;
using cuda::Task;
using cuda::TaskList;

cudaStream_t nat(MUstream_st* s) { return static_cast<cudaStream_t>(s->native); }
cudaEvent_t nat(MUevent_st* e) { return static_cast<cudaEvent_t>(e->native); }
CUdeviceptr dptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

// Whether physical memory of `dev` can be exported as a POSIX file descriptor (to share it).
bool posixFdShareable(int dev) {
  int supported = 0;
  CUdevice d = 0;
  if (!g_cu.cuDeviceGet || !g_cu.cuDeviceGetAttribute || g_cu.cuDeviceGet(&d, dev) != CUDA_SUCCESS ||
      g_cu.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d) !=
          CUDA_SUCCESS)
    return false;
  return supported != 0;
}

CUmemAllocationProp deviceAllocProp(int dev, bool shareable = false) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = shareable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  return prop;
}

class CudaDriver final : public Driver {
 public:
  explicit CudaDriver(int count) : count_(count), defaults_(static_cast<size_t>(count)) {}

  const char* name() const override { return "cuda"; }
  int deviceCount() override { return count_; }

  musaError_t properties(int dev, musaDeviceProp* prop) override {
    cudaDeviceProp p;
    std::memset(&p, 0, sizeof p);
    CUDA_TRY(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties", dev);
    static_assert(sizeof prop->name <= sizeof p.name, "name buffer sizes");
    std::memcpy(prop->name, p.name, sizeof prop->name - 1);
    prop->name[sizeof prop->name - 1] = '\0';
    prop->totalGlobalMem = p.totalGlobalMem;
    prop->multiProcessorCount = p.multiProcessorCount;
    prop->major = p.major;
    prop->minor = p.minor;
    prop->warpSize = p.warpSize;
    prop->maxThreadsPerBlock = p.maxThreadsPerBlock;
    prop->l2CacheSize = static_cast<size_t>(p.l2CacheSize);
    prop->isHostEmulated = 0;
    prop->maxThreadsPerMultiProcessor = p.maxThreadsPerMultiProcessor;
    prop->regsPerMultiprocessor = p.regsPerMultiprocessor;
    prop->sharedMemPerBlock = p.sharedMemPerBlock;
    prop->sharedMemPerMultiprocessor = p.sharedMemPerMultiprocessor;
    prop->sharedMemPerBlockOptin = p.sharedMemPerBlockOptin;
    // (CUDA 13's cudaDeviceProp has no clock rates: attributes in every version)
    CUDA_TRY(cudaDeviceGetAttribute(&prop->clockRate, cudaDevAttrClockRate, dev), "cudaDeviceGetAttribute", dev);
    CUDA_TRY(cudaDeviceGetAttribute(&prop->memoryClockRate, cudaDevAttrMemoryClockRate, dev), "cudaDeviceGetAttribute",
             dev);
    CUDA_TRY(cudaDeviceGetAttribute(&prop->memoryBusWidth, cudaDevAttrGlobalMemoryBusWidth, dev),
             "cudaDeviceGetAttribute", dev);
    prop->pciBusID = p.pciBusID;
    prop->pciDeviceID = p.pciDeviceID;
    prop->pciDomainID = p.pciDomainID;
    prop->isMultiGpuBoard = p.isMultiGpuBoard;
    prop->integrated = p.integrated;
    const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
    snprintf(prop->uuid, sizeof prop->uuid,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    return musaSuccess;
  }

  musaError_t setDevice(int dev) override {
    CUDA_TRY(cudaSetDevice(dev), "cudaSetDevice", dev);
    t_current = dev;
    return musaSuccess;
  }

  musaError_t deviceSynchronize(int dev) override {
    GUARD(dev);
    CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize", dev);
    return musaSuccess;
  }

  void priorityRange(int* least, int* greatest) override {
    std::call_once(priority_once_, [this] {
      DeviceGuard g(workDevice());
      if (g.error() != cudaSuccess || cudaDeviceGetStreamPriorityRange(&least_, &greatest_) != cudaSuccess) {
        (void)cudaGetLastError();
        least_ = greatest_ = 0;
      }
    });
    *least = least_;
    *greatest = greatest_;
  }

  // ---- memory ----
  musaError_t malloc(int dev, void** ptr, size_t size) override {
    RelaxedCaptureMode relaxed;
    GUARD(dev);
    cudaError_t e = cudaMalloc(ptr, size);
    if (e == cudaSuccess) return musaSuccess;
    std::string what = "cudaMalloc(" + human(size) + ")";
    size_t free = 0, total = 0;
    if (e == cudaErrorMemoryAllocation && cudaMemGetInfo(&free, &total) == cudaSuccess)
      what += " with " + human(free) + " free of " + human(total);
    return cudaFail(e, what, dev);
  }

  musaError_t free(void* ptr) override {
    RelaxedCaptureMode relaxed;
    musaPointerAttributes a;
    int owner = -1;
    if (musaError_t e = lookup(ptr, &a, &owner)) return e;
    if (a.type != musaMemoryTypeDevice || owner < 0)
      return fail(musaErrorInvalidValue, "musaFree: " + ptrText(ptr) + " is not CUDA device memory");
    GUARD(owner);
    CUDA_TRY(cudaFree(ptr), "cudaFree(" + ptrText(ptr) + ")", owner);
    return musaSuccess;
  }

  musaError_t memGetInfo(int dev, size_t* free, size_t* total) override {
    GUARD(dev);
    CUDA_TRY(cudaMemGetInfo(free, total), "cudaMemGetInfo", dev);
    return musaSuccess;
  }

  musaError_t hostAlloc(void** ptr, size_t size, unsigned flags) override {
    RelaxedCaptureMode relaxed;
    int dev = workDevice();
    GUARD(dev);
    // Always portable: the front end's pinned memory serves every device.
    unsigned cf = cudaHostAllocPortable | ((flags & musaHostAllocMapped) ? cudaHostAllocMapped : 0u);
    CUDA_TRY(cudaHostAlloc(ptr, size, cf), "cudaHostAlloc(" + human(size) + ") of pinned host memory", dev);
    return musaSuccess;
  }

  musaError_t hostGetDevicePointer(void** device_ptr, void* host_ptr) override {
    RelaxedCaptureMode relaxed;
    int dev = workDevice();
    GUARD(dev);
    CUDA_TRY(cudaHostGetDevicePointer(device_ptr, host_ptr, 0),
             "cudaHostGetDevicePointer(" + ptrText(host_ptr) + ") (was it allocated with musaHostAllocMapped?)", dev);
    return musaSuccess;
  }

  musaError_t hostFree(void* ptr) override {
    RelaxedCaptureMode relaxed;
    musaPointerAttributes a;
    int dev = -1;
    if (musaError_t e = lookup(ptr, &a, &dev)) return e;
    if (a.type != musaMemoryTypeHost)
      return fail(musaErrorInvalidValue, "musaFreeHost: " + ptrText(ptr) + " is not pinned host memory");
    if (dev < 0) dev = workDevice();
    GUARD(dev);
    CUDA_TRY(cudaFreeHost(ptr), "cudaFreeHost(" + ptrText(ptr) + ")", dev);
    return musaSuccess;
  }

  musaError_t pointerAttributes(const void* ptr, musaPointerAttributes* a) override {
    int owner = -1;
    return lookup(ptr, a, &owner);
  }

  // UVA: cudaMemcpyDefault infers the direction, which also tolerates a wrong kind.
  musaError_t memcpy(void* dst, const void* src, size_t n, musaMemcpyKind, MUstream_st* s) override {
    int dev = s ? s->device : workDevice();
    GUARD(dev);
    cudaStream_t st = s ? nat(s) : blockingStream(dev);
    CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, st),
             "cudaMemcpyAsync(" + human(n) + ", " + ptrText(src) + " -> " + ptrText(dst) + ")", dev);
    if (!s) CUDA_TRY(cudaStreamSynchronize(st), "cudaStreamSynchronize after a blocking memcpy", dev);
    return musaSuccess;
  }

  musaError_t memset(void* dst, int value, size_t n, MUstream_st* s) override {
    int dev = s ? s->device : workDevice();
    GUARD(dev);
    cudaStream_t st = s ? nat(s) : blockingStream(dev);
    CUDA_TRY(cudaMemsetAsync(dst, value, n, st), "cudaMemsetAsync(" + ptrText(dst) + ", " + human(n) + ")",
             dev);
    if (!s) CUDA_TRY(cudaStreamSynchronize(st), "cudaStreamSynchronize after a blocking memset", dev);
    return musaSuccess;
  }

  // ---- virtual memory (driver API; GUARD_CTX makes a context current) ----
  musaError_t granularity(int dev, size_t* g) override {
    GUARD_CTX(dev);
    CUmemAllocationProp prop = deviceAllocProp(dev);
    CU_TRY(cuMemGetAllocationGranularity, (g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
           "cuMemGetAllocationGranularity", dev);
    return musaSuccess;
  }

  musaError_t addressReserve(void** ptr, size_t size, size_t alignment) override {
    RelaxedCaptureMode relaxed;
    GUARD_CTX(workDevice());
    CUdeviceptr p = 0;
    CU_TRY(cuMemAddressReserve, (&p, size, alignment, 0, 0), "cuMemAddressReserve(" + human(size) + ")", -1);
    *ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
    return musaSuccess;
  }

  musaError_t addressFree(void* ptr, size_t size) override {
    RelaxedCaptureMode relaxed;
    GUARD_CTX(workDevice());
    CU_TRY(cuMemAddressFree, (dptr(ptr), size), "cuMemAddressFree(" + ptrText(ptr) + ", " + human(size) + ")",
           -1);
    return musaSuccess;
  }

  musaError_t memCreate(musaMemGenericAllocationHandle_t* h, size_t size, int dev) override {
    RelaxedCaptureMode relaxed;
    static_assert(sizeof(musaMemGenericAllocationHandle_t) == sizeof(CUmemGenericAllocationHandle),
                  "allocation handle types must match");
    GUARD_CTX(dev);
    // Shareable with other processes where the device allows it (musaMemExportToShareableHandle).
    CUmemAllocationProp prop = deviceAllocProp(dev, posixFdShareable(dev));
    CUmemGenericAllocationHandle handle = 0;
    if (prop.requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE && g_cu.cuMemCreate &&
        g_cu.cuMemCreate(&handle, size, &prop, 0) == CUDA_SUCCESS) {
      std::lock_guard<std::mutex> g(mu_);
      handles_.insert(handle);
      *h = handle;
      return musaSuccess;
    }
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;  // (a container may refuse file descriptors)
    size_t free = 0, total = 0;
    CU_TRY(cuMemCreate, (&handle, size, &prop, 0),
           "cuMemCreate(" + human(size) + ")" +
               (cudaMemGetInfo(&free, &total) == cudaSuccess
                    ? " with " + human(free) + " free of " + human(total)
                    : std::string()),
           dev);
    std::lock_guard<std::mutex> g(mu_);
    handles_.insert(handle);
    *h = handle;
    return musaSuccess;
  }

  musaError_t memRelease(musaMemGenericAllocationHandle_t h) override {
    RelaxedCaptureMode relaxed;
    if (!knownHandle(h, true))
      return fail(musaErrorInvalidValue, "musaMemRelease: unknown or already released handle");
    int exported = -1;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = exported_.find(h);
      if (it != exported_.end()) exported = it->second, exported_.erase(it);
    }
    if (exported >= 0) close(exported);
    GUARD_CTX(workDevice());
    CU_TRY(cuMemRelease, (h), "cuMemRelease", -1);
    return musaSuccess;
  }

  musaError_t memExport(musaIpcMemHandle_t* shareable, musaMemGenericAllocationHandle_t h) override {
    if (!knownHandle(h, false))
      return fail(musaErrorInvalidValue, "musaMemExportToShareableHandle: unknown or released physical memory handle");
    int fd = -1;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = exported_.find(h);
      if (it != exported_.end()) fd = it->second;
    }
    if (fd < 0) {  // one descriptor per physical allocation, closed when it is released
      GUARD_CTX(workDevice());
      CU_TRY(cuMemExportToShareableHandle, (&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
             "cuMemExportToShareableHandle (this GPU or container does not share physical memory as file "
             "descriptors; set PYTORCH_MUSA_ALLOC_CONF=expandable_segments:False in the sending process)",
             -1);
      std::lock_guard<std::mutex> g(mu_);
      exported_[h] = fd;
    }
    cuda_shareable::describe(fd, shareable);
    return musaSuccess;
  }

  musaError_t memImport(int dev, musaMemGenericAllocationHandle_t* h, const musaIpcMemHandle_t& shareable) override {
    RelaxedCaptureMode relaxed;
    int fd = -1;
    if (auto e = cuda_shareable::take(shareable, &fd)) return e;
    GUARD_CTX(dev);
    CUmemGenericAllocationHandle handle = 0;
    CUresult r = g_cu.cuMemImportFromShareableHandle
                     ? g_cu.cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                     : CUDA_ERROR_NOT_SUPPORTED;
    close(fd);
    if (r != CUDA_SUCCESS) return cuFail(r, "cuMemImportFromShareableHandle", dev);
    std::lock_guard<std::mutex> g(mu_);
    handles_.insert(handle);
    *h = handle;
    return musaSuccess;
  }

  musaError_t memMap(void* ptr, size_t size, size_t offset, musaMemGenericAllocationHandle_t h) override {
    RelaxedCaptureMode relaxed;
    if (!knownHandle(h, false))
      return fail(musaErrorInvalidValue, "musaMemMap: unknown or released physical memory handle");
    GUARD_CTX(workDevice());
    CU_TRY(cuMemMap, (dptr(ptr), size, offset, h, 0),
           "cuMemMap(" + ptrText(ptr) + ", " + human(size) + ", offset " + std::to_string(offset) + ")", -1);
    return musaSuccess;
  }

  musaError_t memUnmap(void* ptr, size_t size) override {
    RelaxedCaptureMode relaxed;
    GUARD_CTX(workDevice());
    CU_TRY(cuMemUnmap, (dptr(ptr), size), "cuMemUnmap(" + ptrText(ptr) + ", " + human(size) + ")", -1);
    return musaSuccess;
  }

  musaError_t memSetAccess(void* ptr, size_t size, int dev) override {
    RelaxedCaptureMode relaxed;
    GUARD_CTX(dev);
    CUmemAccessDesc desc;
    std::memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = dev;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU_TRY(cuMemSetAccess, (dptr(ptr), size, &desc, 1),
           "cuMemSetAccess(" + ptrText(ptr) + ", " + human(size) + ")", dev);
    return musaSuccess;
  }

  // ---- streams ----
  musaError_t streamCreate(MUstream_st* s) override {
    GUARD(s->device);
    // Default streams are non-blocking as well: they stand in for CUDA's
    // default stream without implicit synchronization with the legacy stream.
    unsigned flags =
        (s->is_default || (s->flags & musaStreamNonBlocking)) ? cudaStreamNonBlocking : cudaStreamDefault;
    cudaStream_t st = nullptr;
    CUDA_TRY(cudaStreamCreateWithPriority(&st, flags, s->priority),
             "cudaStreamCreateWithPriority(priority " + std::to_string(s->priority) + ")", s->device);
    s->native = st;
    if (s->is_default) defaults_[static_cast<size_t>(s->device)].store(st);
    return musaSuccess;
  }

  musaError_t streamWrap(MUstream_st* s, void* native) override {
    GUARD(s->device);
    auto cs = static_cast<cudaStream_t>(native);
    int priority = 0, device = -1;
    unsigned flags = 0;
    CUDA_TRY(cudaStreamGetPriority(cs, &priority), "cudaStreamGetPriority (is it a live cudaStream_t?)", s->device);
    CUDA_TRY(cudaStreamGetFlags(cs, &flags), "cudaStreamGetFlags", s->device);
#if CUDART_VERSION >= 12080
    CUDA_TRY(cudaStreamGetDevice(cs, &device), "cudaStreamGetDevice", s->device);
#else
    device = s->device;  // (no way to ask before CUDA 12.8)
#endif
    if (device != s->device)
      return fail(musaErrorInvalidDevice, "the CUDA stream belongs to CUDA device " + std::to_string(device) +
                                              ", not to the current musa device's (CUDA device " +
                                              std::to_string(s->device) + "): wrap it under that device");
    s->native = cs;
    s->priority = priority;
    s->flags = (flags & cudaStreamNonBlocking) ? musaStreamNonBlocking : musaStreamDefault;
    s->borrowed = true;
    return musaSuccess;
  }

  musaError_t streamDestroy(MUstream_st* s) override {
    GUARD(s->device);
    if (!s->borrowed) CUDA_TRY(cudaStreamDestroy(nat(s)), "cudaStreamDestroy", s->device);
    s->native = nullptr;
    if (auto* c = static_cast<Capture*>(s->capture)) {
      forgetCapture(c->id);
      delete c;
      s->capture = nullptr;
    }
    return musaSuccess;
  }

  musaError_t streamQuery(MUstream_st* s) override {
    GUARD(s->device);
    cudaError_t e = cudaStreamQuery(nat(s));
    if (e == cudaErrorNotReady) {
      // Not an error to record; CUDA keeps it as the thread's last error, where the next ATen
      // kernel's launch check (cudaGetLastError) would report it as its own, so clear it (as torch does).
      (void)cudaGetLastError();
      return musaErrorNotReady;
    }
    CUDA_TRY(e, "cudaStreamQuery", s->device);
    return musaSuccess;
  }

  musaError_t streamSynchronize(MUstream_st* s) override {
    GUARD(s->device);
    CUDA_TRY(cudaStreamSynchronize(nat(s)), "cudaStreamSynchronize", s->device);
    return musaSuccess;
  }

  musaError_t streamWaitEvent(MUstream_st* s, MUevent_st* ev) override {
    GUARD(s->device);
    CUDA_TRY(cudaStreamWaitEvent(nat(s), nat(ev), 0),
             "cudaStreamWaitEvent (event of cuda device " + std::to_string(ev->device) + ")", s->device);
    return musaSuccess;
  }

  musaError_t launchTask(MUstream_st* s, std::function<void()> fn, const char* name) override {
    GUARD(s->device);
    auto task = std::make_unique<Task>(Task{std::move(fn), name ? name : "task"});
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    CUDA_TRY(cudaStreamGetCaptureInfo(nat(s), &cs, &id), "cudaStreamGetCaptureInfo", s->device);
    if (cs == cudaStreamCaptureStatusActive) {
      // A captured host node runs at every replay, so the task must live as
      // long as the graph instead of being deleted after one run.
      CUDA_TRY(cudaLaunchHostFunc(nat(s), runCapturedTask, task.get()),
               "cudaLaunchHostFunc(" + task->name + ") during capture", s->device);
      std::lock_guard<std::mutex> g(mu_);
      auto it = captures_.find(id);
      // A capture not begun through beginCapture has no owner: keep the task forever.
      (it != captures_.end() ? *it->second : orphans_).push_back(std::move(task));
      return musaSuccess;
    }
    CUDA_TRY(cudaLaunchHostFunc(nat(s), runTaskOnce, task.get()), "cudaLaunchHostFunc(" + task->name + ")",
             s->device);
    task.release();  // runTaskOnce deletes it
    return musaSuccess;
  }

  // ---- sharing between processes: CUDA IPC handles ----
  musaError_t memGetAddressRange(const void* ptr, void** base, size_t* size) override {
    musaPointerAttributes a;
    int owner = -1;
    if (musaError_t e = lookup(ptr, &a, &owner)) return e;
    if (a.type != musaMemoryTypeDevice || owner < 0)
      return fail(musaErrorInvalidValue, "musaMemGetAddressRange: " + ptrText(ptr) + " is not CUDA device memory");
    GUARD_CTX(owner);
    CUdeviceptr b = 0;
    CU_TRY(cuMemGetAddressRange, (&b, size, dptr(ptr)), "cuMemGetAddressRange(" + ptrText(ptr) + ")", owner);
    *base = reinterpret_cast<void*>(b);
    return musaSuccess;
  }

  musaError_t ipcGetMemHandle(musaIpcMemHandle_t* h, void* ptr) override {
    musaPointerAttributes a;
    int owner = -1;
    if (musaError_t e = lookup(ptr, &a, &owner)) return e;
    if (a.type != musaMemoryTypeDevice || owner < 0)
      return fail(musaErrorInvalidValue, "musaIpcGetMemHandle: " + ptrText(ptr) + " is not CUDA device memory");
    GUARD(owner);
    cudaIpcMemHandle_t ch;
    cudaError_t e = cudaIpcGetMemHandle(&ch, ptr);
    if (e == cudaErrorInvalidValue || e == cudaErrorNotSupported)
      return cudaFail(e, "cudaIpcGetMemHandle(" + ptrText(ptr) +
                             ") (memory of expandable segments cannot be shared through CUDA IPC memory handles; "
                             "set PYTORCH_MUSA_ALLOC_CONF=expandable_segments:False in the sending process)",
                      owner);
    CUDA_TRY(e, "cudaIpcGetMemHandle(" + ptrText(ptr) + ")", owner);
    static_assert(sizeof(ch) <= sizeof(h->reserved), "CUDA IPC handle larger than musa's");
    std::memcpy(h->reserved, &ch, sizeof ch);
    return musaSuccess;
  }

  musaError_t ipcOpenMemHandle(int dev, void** ptr, const musaIpcMemHandle_t& h) override {
    GUARD(dev);
    cudaIpcMemHandle_t ch;
    std::memcpy(&ch, h.reserved, sizeof ch);
    CUDA_TRY(cudaIpcOpenMemHandle(ptr, ch, cudaIpcMemLazyEnablePeerAccess),
             "cudaIpcOpenMemHandle (the sending process must still be running and on this machine)", dev);
    return musaSuccess;
  }

  musaError_t ipcCloseMemHandle(void* ptr) override {
    musaPointerAttributes a;
    int owner = -1;
    if (musaError_t e = lookup(ptr, &a, &owner)) return e;
    GUARD(owner >= 0 ? owner : workDevice());
    CUDA_TRY(cudaIpcCloseMemHandle(ptr), "cudaIpcCloseMemHandle(" + ptrText(ptr) + ")", owner);
    return musaSuccess;
  }

  musaError_t ipcGetEventHandle(musaIpcEventHandle_t* h, MUevent_st* ev) override {
    GUARD(ev->device);
    cudaIpcEventHandle_t ch;
    CUDA_TRY(cudaIpcGetEventHandle(&ch, nat(ev)), "cudaIpcGetEventHandle", ev->device);
    static_assert(sizeof(ch) <= sizeof(h->reserved), "CUDA IPC event handle larger than musa's");
    std::memcpy(h->reserved, &ch, sizeof ch);
    return musaSuccess;
  }

  musaError_t ipcOpenEventHandle(MUevent_st* ev, const musaIpcEventHandle_t& h) override {
    GUARD(ev->device);
    cudaIpcEventHandle_t ch;
    std::memcpy(&ch, h.reserved, sizeof ch);
    cudaEvent_t e = nullptr;
    CUDA_TRY(cudaIpcOpenEventHandle(&e, ch), "cudaIpcOpenEventHandle", ev->device);
    ev->native = e;
    return musaSuccess;
  }

  // ---- events ----
  musaError_t eventCreate(MUevent_st* ev) override {
    GUARD(ev->device);
    unsigned flags = cudaEventDefault;
    if (ev->flags & musaEventDisableTiming) flags |= cudaEventDisableTiming;
    if (ev->flags & musaEventBlockingSync) flags |= cudaEventBlockingSync;
    if (ev->flags & musaEventInterprocess) flags |= cudaEventInterprocess;
    cudaEvent_t e = nullptr;
    CUDA_TRY(cudaEventCreateWithFlags(&e, flags), "cudaEventCreateWithFlags", ev->device);
    ev->native = e;
    return musaSuccess;
  }

  musaError_t eventDestroy(MUevent_st* ev) override {
    GUARD(ev->device);
    CUDA_TRY(cudaEventDestroy(nat(ev)), "cudaEventDestroy", ev->device);
    ev->native = nullptr;
    return musaSuccess;
  }

  musaError_t eventRecord(MUevent_st* ev, MUstream_st* s) override {
    GUARD(s->device);
    CUDA_TRY(cudaEventRecord(nat(ev), nat(s)), "cudaEventRecord", s->device);
    ev->recorded = true;
    return musaSuccess;
  }

  musaError_t eventQuery(MUevent_st* ev) override {
    GUARD(ev->device);
    cudaError_t e = cudaEventQuery(nat(ev));
    if (e == cudaErrorNotReady) {
      // Not an error to record; CUDA keeps it as the thread's last error, where the next ATen
      // kernel's launch check (cudaGetLastError) would report it as its own, so clear it (as torch does).
      (void)cudaGetLastError();
      return musaErrorNotReady;
    }
    CUDA_TRY(e, "cudaEventQuery", ev->device);
    return musaSuccess;
  }

  musaError_t eventSynchronize(MUevent_st* ev) override {
    GUARD(ev->device);
    CUDA_TRY(cudaEventSynchronize(nat(ev)), "cudaEventSynchronize", ev->device);
    return musaSuccess;
  }

  musaError_t eventElapsed(float* ms, MUevent_st* a, MUevent_st* b) override {
    GUARD(a->device);
    CUDA_TRY(cudaEventElapsedTime(ms, nat(a), nat(b)), "cudaEventElapsedTime", a->device);
    return musaSuccess;
  }

  // ---- capture and graphs ----
  musaError_t beginCapture(MUstream_st* s, musaStreamCaptureMode mode) override {
    if (s->capture)
      return fail(musaErrorStreamCaptureUnsupported, "the stream is already capturing; end that capture first");
    GUARD(s->device);
    cudaStreamCaptureMode cm = mode == musaStreamCaptureModeRelaxed       ? cudaStreamCaptureModeRelaxed
                               : mode == musaStreamCaptureModeThreadLocal ? cudaStreamCaptureModeThreadLocal
                                                                          : cudaStreamCaptureModeGlobal;
    CUDA_TRY(cudaStreamBeginCapture(nat(s), cm), "cudaStreamBeginCapture", s->device);
    auto* c = new Capture();
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamGetCaptureInfo(nat(s), &cs, &c->id) != cudaSuccess) (void)cudaGetLastError();
    {
      std::lock_guard<std::mutex> g(mu_);
      captures_[c->id] = c->tasks;
    }
    s->capture = c;
    return musaSuccess;
  }

  musaError_t endCapture(MUstream_st* s, MUgraph_st** graph) override {
    *graph = nullptr;
    GUARD(s->device);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CUDA_TRY(cudaStreamIsCapturing(nat(s), &cs), "cudaStreamIsCapturing", s->device);
    if (cs == cudaStreamCaptureStatusNone)  // CUDA would say cudaErrorIllegalState
      return fail(musaErrorStreamCaptureUnmatched, "musaStreamEndCapture: the stream is not capturing");
    cudaGraph_t g = nullptr;
    cudaError_t e = cudaStreamEndCapture(nat(s), &g);
    // Ending from the wrong thread leaves the capture running; keep our state then.
    if (cudaStreamIsCapturing(nat(s), &cs) != cudaSuccess) (void)cudaGetLastError();
    std::unique_ptr<Capture> c;
    if (cs == cudaStreamCaptureStatusNone && s->capture) {
      c.reset(static_cast<Capture*>(s->capture));
      s->capture = nullptr;
      forgetCapture(c->id);
    }
    if (e != cudaSuccess) {
      if (g) (void)cudaGraphDestroy(g);
      return cudaFail(e, "cudaStreamEndCapture", s->device);
    }
    auto* cg = new CudaGraph();
    cg->graph = g;
    cg->device = s->device;
    cg->tasks = c ? c->tasks : std::make_shared<TaskList>();
    *graph = cg;
    return musaSuccess;
  }

  musaError_t isCapturing(MUstream_st* s, musaStreamCaptureStatus* status) override {
    GUARD(s->device);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CUDA_TRY(cudaStreamIsCapturing(nat(s), &cs), "cudaStreamIsCapturing", s->device);
    *status = cs == cudaStreamCaptureStatusActive        ? musaStreamCaptureStatusActive
              : cs == cudaStreamCaptureStatusInvalidated ? musaStreamCaptureStatusInvalidated
                                                         : musaStreamCaptureStatusNone;
    return musaSuccess;
  }

  musaError_t invalidateCapture(MUstream_st*, const std::string&) override {
    // CUDA invalidates captures itself when a call conflicts with them.
    return fail(musaErrorNotSupported, "musaStreamInvalidateCapture: not available on the cuda driver");
  }
  musaError_t captureInfo(MUstream_st* s, musaStreamCaptureStatus* status, unsigned long long* id) override {
    GUARD(s->device);
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    unsigned long long cid = 0;
    CUDA_TRY(cudaStreamGetCaptureInfo(nat(s), &cs, &cid), "cudaStreamGetCaptureInfo", s->device);
    *status = cs == cudaStreamCaptureStatusActive        ? musaStreamCaptureStatusActive
              : cs == cudaStreamCaptureStatusInvalidated ? musaStreamCaptureStatusInvalidated
                                                         : musaStreamCaptureStatusNone;
    *id = cs == cudaStreamCaptureStatusNone ? 0 : cid;
    return musaSuccess;
  }

  musaError_t graphInstantiate(MUgraphExec_st** exec, MUgraph_st* graph) override {
    auto* cg = dynamic_cast<CudaGraph*>(graph);
    if (!cg) return fail(musaErrorInvalidValue, "musaGraphInstantiate: the graph is not a cuda driver graph");
    GUARD(cg->device);
    cudaGraphExec_t e = nullptr;
    CUDA_TRY(cudaGraphInstantiateWithFlags(&e, cg->graph, 0), "cudaGraphInstantiate", cg->device);
    auto* ge = new CudaGraphExec();
    ge->exec = e;
    ge->device = cg->device;
    ge->tasks = cg->tasks;
    *exec = ge;
    return musaSuccess;
  }

  musaError_t graphLaunch(MUgraphExec_st* exec, MUstream_st* s) override {
    auto* ge = dynamic_cast<CudaGraphExec*>(exec);
    if (!ge) return fail(musaErrorInvalidValue, "musaGraphLaunch: the exec is not a cuda driver graph exec");
    GUARD(s->device);
    CUDA_TRY(cudaGraphLaunch(ge->exec, nat(s)), "cudaGraphLaunch", s->device);
    return musaSuccess;
  }

 private:
  // A device that already has a context, preferring the current one; -1 if none.
  int activeDevice() {
    int cur = currentDevice();
    if (ctxActive(cur)) return cur;
    for (int i = 0; i < count_; ++i)
      if (ctxActive(i)) return i;
    return -1;
  }

  // The device for calls that name none (blocking copies, pinned memory,
  // address ranges): the thread's setDevice choice, else a device already in
  // use, so such calls do not create a context on device 0 by accident.
  int workDevice() {
    int d = activeDevice();
    return d >= 0 ? d : currentDevice();
  }

  // Fills *a for ptr and sets *owner to the device whose context the pointer
  // belongs to (-1 if none).
  musaError_t lookup(const void* ptr, musaPointerAttributes* a, int* owner) {
    *a = {musaMemoryTypeUnregistered, -1};
    *owner = -1;
    // cudaPointerGetAttributes creates a context on the current device if it
    // has none; use a device that has one. No context at all: nothing is allocated.
    int dev = activeDevice();
    if (dev < 0) return musaSuccess;
    GUARD(dev);
    cudaPointerAttributes pa;
    std::memset(&pa, 0, sizeof pa);
    cudaError_t e = cudaPointerGetAttributes(&pa, ptr);
    if (e == cudaErrorInvalidValue) {  // older drivers: unregistered host memory
      (void)cudaGetLastError();
      return musaSuccess;
    }
    CUDA_TRY(e, "cudaPointerGetAttributes(" + ptrText(ptr) + ")", dev);
    if (pa.type == cudaMemoryTypeDevice || pa.type == cudaMemoryTypeManaged) {
      *a = {musaMemoryTypeDevice, pa.device};
      *owner = pa.device;
    } else if (pa.type == cudaMemoryTypeHost) {
      *a = {musaMemoryTypeHost, -1};
      *owner = pa.device;  // the device that was current when it was allocated
    }
    return musaSuccess;
  }

  // Blocking calls use the device's default stream when it exists, so they are
  // ordered after the work queued there; otherwise the legacy stream.
  cudaStream_t blockingStream(int dev) {
    if (dev >= 0 && dev < count_)
      if (void* s = defaults_[static_cast<size_t>(dev)].load()) return static_cast<cudaStream_t>(s);
    return cudaStreamLegacy;
  }

  // The CUDA driver crashes on bogus allocation handles, so only pass on
  // handles made by memCreate and not yet released. `take` removes it.
  bool knownHandle(musaMemGenericAllocationHandle_t h, bool take) {
    std::lock_guard<std::mutex> g(mu_);
    return take ? handles_.erase(h) > 0 : handles_.count(h) > 0;
  }

  void forgetCapture(unsigned long long id) {
    std::lock_guard<std::mutex> g(mu_);
    captures_.erase(id);
  }

  int count_;
  std::vector<std::atomic<void*>> defaults_;  // per physical device: its default cudaStream_t
  std::once_flag priority_once_;
  int least_ = 0, greatest_ = 0;
  std::mutex mu_;
  std::unordered_map<unsigned long long, std::shared_ptr<TaskList>> captures_;  // capture id -> tasks
  TaskList orphans_;
  std::unordered_set<musaMemGenericAllocationHandle_t> handles_;  // live memCreate handles
  std::unordered_map<musaMemGenericAllocationHandle_t, int> exported_;  // their exported descriptors
};

}  // namespace
}  // namespace musa_rt

// Exported entry point the front end looks up with dlsym. Creating the driver
// touches no device: cudaGetDeviceCount and entry-point lookups make no context.
extern "C" __attribute__((visibility("default"))) musa_rt::Driver* musa_make_cuda_driver(
    std::string* why_not) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  std::string why;
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  } else if (count <= 0) {
    why = "cudaGetDeviceCount found no CUDA device";
  }
  if (!why.empty()) {
    if (why_not) *why_not = why;
    return nullptr;
  }
  static std::once_flag once;
  std::call_once(once, musa_rt::loadCuApi);  // VMM calls report what is missing; the rest works without it
  return new musa_rt::CudaDriver(count);
}
