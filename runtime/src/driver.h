// The narrow interface every MUSA driver implements. The front end
// (runtime.cpp) validates arguments, maps visible device numbers to the
// driver's physical ones and keeps per-thread state; drivers do the work.
#pragma once

#include <musa/runtime.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

// Stream and event objects are shared between the front end and the drivers;
// `native` is the driver's own handle (e.g. a cudaStream_t).
struct MUstream_st {
  int device = 0;  // physical device index
  int priority = 0;
  unsigned flags = 0;
  bool is_default = false;
  void* native = nullptr;
  bool borrowed = false;    // `native` belongs to the caller (musaStreamCreateFromNative)
  void* capture = nullptr;  // driver-owned capture state while capturing
  double ready_ms = 0;      // host driver: when the work launched so far completes (host_clock.h)
};

struct MUevent_st {
  int device = 0;
  unsigned flags = 0;
  void* native = nullptr;
  bool recorded = false;
  double time_ms = 0;  // host driver: when the event's work completed
  void* capture = nullptr;  // host driver: the capture it was last recorded in, if any
};

// Graphs are driver-specific; drivers derive from these.
struct MUgraph_st {
  virtual ~MUgraph_st() = default;
  virtual size_t nodeCount() const = 0;
  virtual musaError_t debugDump(const char* path) const = 0;
};
struct MUgraphExec_st {
  virtual ~MUgraphExec_st() = default;
};

namespace musa_rt {

// Records a detailed message for the calling thread and returns `err`.
musaError_t fail(musaError_t err, const std::string& message);

class Driver {
 public:
  virtual ~Driver() = default;
  virtual const char* name() const = 0;
  virtual int deviceCount() = 0;
  virtual musaError_t properties(int dev, musaDeviceProp* prop) = 0;
  // Makes `dev` current for the calling thread at the driver level.
  virtual musaError_t setDevice(int dev) = 0;
  virtual musaError_t deviceSynchronize(int dev) = 0;
  virtual void priorityRange(int* least, int* greatest) = 0;

  virtual musaError_t malloc(int dev, void** ptr, size_t size) = 0;
  virtual musaError_t free(void* ptr) = 0;
  virtual musaError_t memGetInfo(int dev, size_t* free, size_t* total) = 0;
  // flags: musaHostAlloc* (Mapped: the devices can address the memory in place).
  virtual musaError_t hostAlloc(void** ptr, size_t size, unsigned flags) = 0;
  // The device address of memory hostAlloc mapped (musaHostGetDevicePointer).
  virtual musaError_t hostGetDevicePointer(void** device_ptr, void* host_ptr) = 0;
  virtual musaError_t hostFree(void* ptr) = 0;
  virtual musaError_t pointerAttributes(const void* ptr, musaPointerAttributes* attr) = 0;
  // `stream` null means a blocking call (completes before returning).
  virtual musaError_t memcpy(void* dst, const void* src, size_t n, musaMemcpyKind kind,
                             MUstream_st* stream) = 0;
  virtual musaError_t memset(void* dst, int value, size_t n, MUstream_st* stream) = 0;

  virtual musaError_t granularity(int dev, size_t* g) = 0;
  virtual musaError_t addressReserve(void** ptr, size_t size, size_t alignment) = 0;
  virtual musaError_t addressFree(void* ptr, size_t size) = 0;
  virtual musaError_t memCreate(musaMemGenericAllocationHandle_t* h, size_t size, int dev) = 0;
  virtual musaError_t memRelease(musaMemGenericAllocationHandle_t h) = 0;
  virtual musaError_t memExport(musaIpcMemHandle_t* shareable, musaMemGenericAllocationHandle_t h) = 0;
  // Imports onto the caller's current (physical) device `dev`.
  virtual musaError_t memImport(int dev, musaMemGenericAllocationHandle_t* h, const musaIpcMemHandle_t& shareable) = 0;
  virtual musaError_t memMap(void* ptr, size_t size, size_t offset,
                             musaMemGenericAllocationHandle_t h) = 0;
  virtual musaError_t memUnmap(void* ptr, size_t size) = 0;
  virtual musaError_t memSetAccess(void* ptr, size_t size, int dev) = 0;

  // Sharing between processes: a handle names the whole allocation holding a pointer.
  virtual musaError_t memGetAddressRange(const void* ptr, void** base, size_t* size) = 0;
  virtual musaError_t ipcGetMemHandle(musaIpcMemHandle_t* h, void* ptr) = 0;
  // Maps the handle's allocation; `dev` is the caller's current (physical) device.
  virtual musaError_t ipcOpenMemHandle(int dev, void** ptr, const musaIpcMemHandle_t& h) = 0;
  virtual musaError_t ipcCloseMemHandle(void* ptr) = 0;
  virtual musaError_t ipcGetEventHandle(musaIpcEventHandle_t* h, MUevent_st* e) = 0;
  // Fills `e` (device, flags, native) for the event the handle names.
  virtual musaError_t ipcOpenEventHandle(MUevent_st* e, const musaIpcEventHandle_t& h) = 0;

  virtual musaError_t streamCreate(MUstream_st* s) = 0;
  // Makes `s` stand for a native stream that `s->device`'s caller created: sets native,
  // priority and flags, and marks it borrowed, so streamDestroy leaves the native stream alone.
  virtual musaError_t streamWrap(MUstream_st* s, void* native) = 0;
  virtual musaError_t streamDestroy(MUstream_st* s) = 0;
  virtual musaError_t streamQuery(MUstream_st* s) = 0;
  virtual musaError_t streamSynchronize(MUstream_st* s) = 0;
  virtual musaError_t streamWaitEvent(MUstream_st* s, MUevent_st* e) = 0;
  virtual musaError_t launchTask(MUstream_st* s, std::function<void()> task, const char* name) = 0;
  // Holds `s` busy for about `cycles` device clock cycles without blocking the caller (a spin kernel).
  virtual musaError_t streamSpin(MUstream_st*, unsigned long long) {
    return fail(musaErrorNotSupported, std::string("musaStreamSpin: the ") + name() +
                                           " driver has no spin of its own (torch.musa._sleep uses CUDA's there)");
  }

  virtual musaError_t eventCreate(MUevent_st* e) = 0;
  virtual musaError_t eventDestroy(MUevent_st* e) = 0;
  virtual musaError_t eventRecord(MUevent_st* e, MUstream_st* s) = 0;
  virtual musaError_t eventQuery(MUevent_st* e) = 0;
  virtual musaError_t eventSynchronize(MUevent_st* e) = 0;
  virtual musaError_t eventElapsed(float* ms, MUevent_st* a, MUevent_st* b) = 0;

  virtual musaError_t beginCapture(MUstream_st* s, musaStreamCaptureMode mode) = 0;
  virtual musaError_t endCapture(MUstream_st* s, MUgraph_st** graph) = 0;
  virtual musaError_t isCapturing(MUstream_st* s, musaStreamCaptureStatus* status) = 0;
  // False only when no stream of this driver is capturing: a check made for every op can stop
  // there. A driver that does not keep count answers true (ask isCapturing).
  virtual bool anyCapturing() const { return true; }
  virtual musaError_t invalidateCapture(MUstream_st* s, const std::string& why) = 0;
  virtual musaError_t captureInfo(MUstream_st* s, musaStreamCaptureStatus* status, unsigned long long* id) = 0;
  virtual musaError_t graphInstantiate(MUgraphExec_st** exec, MUgraph_st* graph) = 0;
  virtual musaError_t graphLaunch(MUgraphExec_st* exec, MUstream_st* s) = 0;
};

// Returns null and explains in *why_not when the environment is invalid.
std::unique_ptr<Driver> makeHostDriver(std::string* why_not);
// Entry point exported by the cuda driver plugin (libmusa_cuda_driver.so).
using MakeDriverFn = Driver* (*)(std::string* why_not);

// Parses sizes such as "16GiB", "512MiB", "1.5G", "4096". Returns false on bad input.
bool parseByteSize(const std::string& text, size_t* out);

}  // namespace musa_rt
