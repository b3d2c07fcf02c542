// What the cuda driver's calls share: CUDA error reporting, the driver API
// through runtime entry points (no link against libcuda), the per-thread
// device and the device guard, and relaxed capture mode for memory calls.
// Included by cuda_driver.cpp only.
#pragma once

#include <cuda.h>  // types only: driver functions come from entry points
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "driver.h"

namespace musa_rt::cuda_support {


inline std::string human(size_t bytes) {
  char buf[64];
  if (bytes >= (size_t(1) << 30))
    snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / double(size_t(1) << 30));
  else if (bytes >= (size_t(1) << 20))
    snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / double(size_t(1) << 20));
  else
    snprintf(buf, sizeof buf, "%zu bytes", bytes);
  return buf;
}

inline std::string ptrText(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// ---- errors ----

inline musaError_t mapError(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation: return musaErrorMemoryAllocation;
    case cudaErrorInvalidDevice: return musaErrorInvalidDevice;
    case cudaErrorNoDevice: return musaErrorNoDevice;
    case cudaErrorInvalidValue: return musaErrorInvalidValue;
    case cudaErrorInvalidResourceHandle: return musaErrorInvalidResourceHandle;
    case cudaErrorNotReady: return musaErrorNotReady;
    case cudaErrorNotSupported: return musaErrorNotSupported;
    case cudaErrorInitializationError:
    case cudaErrorInsufficientDriver: return musaErrorInitializationError;
    case cudaErrorStreamCaptureUnsupported: return musaErrorStreamCaptureUnsupported;
    case cudaErrorStreamCaptureUnjoined: return musaErrorStreamCaptureUnjoined;
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureIsolation: return musaErrorStreamCaptureInvalidated;
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureWrongThread: return musaErrorStreamCaptureUnmatched;
    case cudaErrorStreamCaptureImplicit: return musaErrorStreamCaptureImplicit;
    case cudaErrorCapturedEvent: return musaErrorCapturedEvent;
    default: return musaErrorUnknown;
  }
}

// Records "<what> on cuda device N failed: cudaErrorX: text" and returns the mapped code.
inline musaError_t cudaFail(cudaError_t e, const std::string& what, int dev = -1) {
  (void)cudaGetLastError();  // clear a non-sticky error so later unrelated checks don't see it
  std::string msg = what;
  if (dev >= 0) msg += " on cuda device " + std::to_string(dev);
  msg += std::string(" failed: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  // Kernel faults surface at whatever call comes next; say so.
  if (e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorIllegalInstruction ||
      e == cudaErrorMisalignedAddress || e == cudaErrorAssert || e == cudaErrorHardwareStackError)
    msg += " (kernel errors are reported asynchronously, so an earlier launch may be at fault; "
           "CUDA_LAUNCH_BLOCKING=1 locates it; the CUDA context is now unusable)";
  return fail(mapError(e), msg);
}

// `what` is only evaluated when the call fails.
#define CUDA_TRY(call, what, dev)                                 \
  do {                                                            \
    if (cudaError_t err_ = (call)) return cudaFail(err_, what, dev); \
  } while (0)

// ---- driver API through runtime entry points (no link against libcuda) ----

#define MUSA_CU_FUNCTIONS(X)                                                               \
  X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet) X(cuDevicePrimaryCtxGetState)      \
  X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) \
  X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAddressRange) \
  X(cuDeviceGetAttribute) X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)

struct CuApi {
#define X(fn) decltype(&::fn) fn = nullptr;
  MUSA_CU_FUNCTIONS(X)
#undef X
  std::string missing;  // symbols the driver did not provide, for error messages
};
inline CuApi g_cu;

template <typename Fn>
void loadEntry(const char* symbol, Fn* out) {
  void* p = nullptr;
  // Ask for the ABI of the cuda.h we compiled against, so the decltype matches.
#if CUDART_VERSION >= 12050
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &p, CUDA_VERSION, cudaEnableDefault, &q);
  bool ok = e == cudaSuccess && q == cudaDriverEntryPointSuccess;
#elif CUDART_VERSION >= 12000
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPoint(symbol, &p, cudaEnableDefault, &q);
  bool ok = e == cudaSuccess && q == cudaDriverEntryPointSuccess;
#else
  bool ok = cudaGetDriverEntryPoint(symbol, &p, cudaEnableDefault) == cudaSuccess;
#endif
  if (ok && p) {
    *out = reinterpret_cast<Fn>(p);
    return;
  }
  (void)cudaGetLastError();
  g_cu.missing += std::string(g_cu.missing.empty() ? "" : ", ") + symbol;
}

inline void loadCuApi() {
#define X(fn) loadEntry(#fn, &g_cu.fn);
  MUSA_CU_FUNCTIONS(X)
#undef X
}

inline musaError_t cuFail(CUresult r, const std::string& what, int dev = -1) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (g_cu.cuGetErrorName) g_cu.cuGetErrorName(r, &name);
  if (g_cu.cuGetErrorString) g_cu.cuGetErrorString(r, &text);
  std::string msg = what;
  if (dev >= 0) msg += " on cuda device " + std::to_string(dev);
  msg += " failed: " + (name ? std::string(name) : "CUresult " + std::to_string(int(r))) + ": " +
         (text ? text : "unknown error");
  musaError_t m = musaErrorUnknown;
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: m = musaErrorMemoryAllocation; break;
    case CUDA_ERROR_INVALID_VALUE: m = musaErrorInvalidValue; break;
    case CUDA_ERROR_INVALID_DEVICE: m = musaErrorInvalidDevice; break;
    case CUDA_ERROR_NOT_SUPPORTED: m = musaErrorNotSupported; break;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_INVALID_CONTEXT: m = musaErrorInitializationError; break;
    default: break;
  }
  return fail(m, msg);
}

#define CU_TRY(fn, args, what, dev)                                                        \
  do {                                                                                    \
    if (!g_cu.fn)                                                                         \
      return fail(musaErrorNotSupported, "virtual memory management needs the CUDA driver " \
                                         "function " #fn ", which the installed driver "   \
                                         "does not provide (missing: " + g_cu.missing + ")"); \
    if (CUresult r_ = g_cu.fn args) return cuFail(r_, what, dev);                          \
  } while (0)

// ---- devices ----

// The physical device this thread chose through setDevice, or -1.
inline thread_local int t_current = -1;

inline int currentDevice() {
  if (t_current >= 0) return t_current;
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    d = 0;
  }
  return d;
}

// Whether the device's primary context exists (true when that cannot be told).
inline bool ctxActive(int dev) {
  CUdevice d = 0;
  unsigned flags = 0;
  int active = 0;
  if (!g_cu.cuDeviceGet || !g_cu.cuDevicePrimaryCtxGetState || g_cu.cuDeviceGet(&d, dev) != CUDA_SUCCESS ||
      g_cu.cuDevicePrimaryCtxGetState(d, &flags, &active) != CUDA_SUCCESS)
    return true;
  return active != 0;
}

// Makes `dev` current and restores the previous device on scope exit.
// `force` calls cudaSetDevice even when `dev` is already current, which makes
// its primary context current for driver-API calls.
class DeviceGuard {
 public:
  explicit DeviceGuard(int dev, bool force = false) : dev_(dev) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      (void)cudaGetLastError();
      prev_ = -1;
    }
    if (force || prev_ != dev) err_ = cudaSetDevice(dev);
  }
  ~DeviceGuard() {
    // Going back to a device this thread never used would create a CUDA
    // context there (hundreds of MiB), so only go back to one in use.
    if (err_ == cudaSuccess && prev_ >= 0 && prev_ != dev_ && (prev_ == t_current || ctxActive(prev_)))
      (void)cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  cudaError_t error() const { return err_; }

 private:
  int dev_;
  int prev_ = -1;
  cudaError_t err_ = cudaSuccess;
};

#define GUARD_IMPL(dev, force)    \
  DeviceGuard guard_(dev, force); \
  if (guard_.error() != cudaSuccess) return cudaFail(guard_.error(), "cudaSetDevice", dev)
#define GUARD(dev) GUARD_IMPL(dev, false)
#define GUARD_CTX(dev) GUARD_IMPL(dev, true)

// Memory management may run while this thread captures (the caching
// allocator grows a graph's private pool during capture). CUDA forbids it in
// global mode unless the thread relaxes its capture mode for the call, as
// torch's CUDA allocator does.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace musa_rt::cuda_support
