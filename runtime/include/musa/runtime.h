// The MUSA runtime: a CUDA-shaped C++ API over pluggable drivers.
// No torch or Python dependency. Every call returns a musaError_t; the
// thread's last detailed message is available through musaGetLastErrorMessage().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

extern "C++" {

enum musaError_t : int {
  musaSuccess = 0,
  musaErrorInvalidValue = 1,
  musaErrorMemoryAllocation = 2,
  musaErrorInitializationError = 3,
  musaErrorInvalidConfiguration = 9,  // a kernel launch asks for more threads or blocks than the device has
  musaErrorInvalidDevice = 101,
  musaErrorNoDevice = 100,
  musaErrorInvalidResourceHandle = 400,
  musaErrorNotReady = 600,
  musaErrorIllegalAddress = 700,  // a kernel touched memory outside any allocation
  musaErrorLaunchFailure = 719,   // a kernel faulted (host SIMT: divergent barrier, exception)
  musaErrorNotSupported = 801,
  musaErrorStreamCaptureUnsupported = 900,
  musaErrorStreamCaptureInvalidated = 901,
  musaErrorStreamCaptureUnmatched = 903,
  musaErrorStreamCaptureUnjoined = 904,
  musaErrorStreamCaptureImplicit = 906,
  musaErrorCapturedEvent = 907,
  musaErrorUnknown = 999,
};

enum musaMemcpyKind : int {
  musaMemcpyHostToHost = 0,
  musaMemcpyHostToDevice = 1,
  musaMemcpyDeviceToHost = 2,
  musaMemcpyDeviceToDevice = 3,
  musaMemcpyDefault = 4,
};

// Which calls a capture forbids (CUDA's cudaStreamCaptureMode): Global, any
// thread's potentially unsafe call (synchronizing, querying, blocking copies);
// ThreadLocal, those of the capturing thread; Relaxed, only calls that
// conflict with the capture itself (syncing the capturing stream).
enum musaStreamCaptureMode : int {
  musaStreamCaptureModeGlobal = 0,
  musaStreamCaptureModeThreadLocal = 1,
  musaStreamCaptureModeRelaxed = 2,
};

enum musaStreamCaptureStatus : int {
  musaStreamCaptureStatusNone = 0,
  musaStreamCaptureStatusActive = 1,
  musaStreamCaptureStatusInvalidated = 2,
};

constexpr unsigned musaStreamDefault = 0x0;
constexpr unsigned musaStreamNonBlocking = 0x1;
constexpr unsigned musaEventDefault = 0x0;
constexpr unsigned musaEventBlockingSync = 0x1;
constexpr unsigned musaEventDisableTiming = 0x2;
constexpr unsigned musaEventInterprocess = 0x4;  // shareable with musaIpcGetEventHandle (needs DisableTiming)
constexpr unsigned musaIpcMemLazyEnablePeerAccess = 0x1;

struct musaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int multiProcessorCount;
  int major;
  int minor;
  int warpSize;
  int maxThreadsPerBlock;
  size_t l2CacheSize;
  int isHostEmulated;  // 1 for the host driver's devices
  char uuid[37];
  // The rest as cudaDeviceProp's (kernel authors size tiles by them). The host driver's are
  // those of an emulated device: host memory is shared with the CPU, so it is "integrated".
  int maxThreadsPerMultiProcessor;
  int regsPerMultiprocessor;
  size_t sharedMemPerBlock;
  size_t sharedMemPerMultiprocessor;
  size_t sharedMemPerBlockOptin;
  int clockRate;        // kHz
  int memoryClockRate;  // kHz
  int memoryBusWidth;   // bits
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int isMultiGpuBoard;
  int integrated;
};

enum musaMemoryType : int {
  musaMemoryTypeUnregistered = 0,
  musaMemoryTypeHost = 1,
  musaMemoryTypeDevice = 2,
};

struct musaPointerAttributes {
  musaMemoryType type;
  int device;
};

typedef struct MUstream_st* musaStream_t;
typedef struct MUevent_st* musaEvent_t;
typedef struct MUgraph_st* musaGraph_t;
typedef struct MUgraphExec_st* musaGraphExec_t;
typedef unsigned long long musaMemGenericAllocationHandle_t;

// Opaque handles naming device memory or an event to another process (as CUDA's, 64 bytes).
struct musaIpcMemHandle_t {
  char reserved[64];
};
struct musaIpcEventHandle_t {
  char reserved[64];
};

// ---- errors ----
const char* musaGetErrorName(musaError_t error);
const char* musaGetErrorString(musaError_t error);
// Detailed message of this thread's most recent failing call ("" if none).
const char* musaGetLastErrorMessage();
// Returns and clears this thread's last error code.
musaError_t musaGetLastError();
musaError_t musaPeekAtLastError();
// Records `error` with `message` as this thread's last error and returns it: how work
// launched outside the runtime (host SIMT kernels of extensions) reports its errors.
musaError_t musaSetLastError(musaError_t error, const char* message);

// ---- driver ----
// Name of the active driver ("host" or "cuda"); chosen by TORCH_MUSA_DRIVER.
const char* musaGetDriverName();
// The MUSA runtime API level this runtime implements, as MUSA writes it: major * 1000 + minor * 10 + patch.
constexpr int MUSART_VERSION = 4030;
musaError_t musaRuntimeGetVersion(int* version);
// Names of the drivers compiled into this runtime, comma-separated.
const char* musaGetBuiltDrivers();

// ---- devices ----
musaError_t musaGetDeviceCount(int* count);
musaError_t musaGetDevice(int* device);
musaError_t musaSetDevice(int device);
musaError_t musaGetDeviceProperties(musaDeviceProp* prop, int device);
musaError_t musaDeviceSynchronize();
musaError_t musaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
// The driver's own ordinal for a visible device (the CUDA ordinal for the
// cuda driver), after MUSA_VISIBLE_DEVICES renumbering.
musaError_t musaDeviceGetDriverOrdinal(int device, int* ordinal);
// Whether the device has been touched (context created) in this process.
musaError_t musaDeviceIsInitialized(int device, int* initialized);

// ---- memory ----
musaError_t musaMalloc(void** ptr, size_t size);
musaError_t musaFree(void* ptr);
musaError_t musaMemGetInfo(size_t* free, size_t* total);
musaError_t musaHostAlloc(void** ptr, size_t size);
// Flags of musaHostAlloc, as cudaHostAlloc's: Portable pins for every device,
// Mapped also maps the memory into the devices' address space, so kernels
// read and write it in place (musaHostGetDevicePointer gives their address).
constexpr unsigned musaHostAllocDefault = 0;
constexpr unsigned musaHostAllocPortable = 1;
constexpr unsigned musaHostAllocMapped = 2;
musaError_t musaHostAlloc(void** ptr, size_t size, unsigned flags);
// The device address of mapped host memory (as cudaHostGetDevicePointer; flags must be 0).
musaError_t musaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned flags);
musaError_t musaFreeHost(void* ptr);
musaError_t musaPointerGetAttributes(musaPointerAttributes* attr, const void* ptr);
musaError_t musaMemcpy(void* dst, const void* src, size_t count, musaMemcpyKind kind);
musaError_t musaMemcpyAsync(void* dst, const void* src, size_t count, musaMemcpyKind kind,
                            musaStream_t stream);
musaError_t musaMemset(void* dst, int value, size_t count);
musaError_t musaMemsetAsync(void* dst, int value, size_t count, musaStream_t stream);

// ---- virtual memory management (reserve / create / map) ----
musaError_t musaMemGetAllocationGranularity(size_t* granularity, int device);
musaError_t musaMemAddressReserve(void** ptr, size_t size, size_t alignment);
musaError_t musaMemAddressFree(void* ptr, size_t size);
musaError_t musaMemCreate(musaMemGenericAllocationHandle_t* handle, size_t size, int device);
musaError_t musaMemRelease(musaMemGenericAllocationHandle_t handle);
// Physical memory shared with another process (cuMemExportToShareableHandle /
// cuMemImportFromShareableHandle; the shareable handle names the exporting
// process's file descriptor, which the importer takes while the exporter runs).
musaError_t musaMemExportToShareableHandle(musaIpcMemHandle_t* shareable, musaMemGenericAllocationHandle_t handle);
musaError_t musaMemImportFromShareableHandle(musaMemGenericAllocationHandle_t* handle, musaIpcMemHandle_t shareable);
musaError_t musaMemMap(void* ptr, size_t size, size_t offset,
                       musaMemGenericAllocationHandle_t handle);
musaError_t musaMemUnmap(void* ptr, size_t size);
// Grants the device read/write access to a mapped range.
musaError_t musaMemSetAccess(void* ptr, size_t size, int device);

// ---- streams ----
// A null musaStream_t means the current device's default stream.
musaError_t musaStreamCreate(musaStream_t* stream);
musaError_t musaStreamCreateWithPriority(musaStream_t* stream, unsigned flags, int priority);
musaError_t musaStreamDestroy(musaStream_t stream);
musaError_t musaStreamQuery(musaStream_t stream);
musaError_t musaStreamSynchronize(musaStream_t stream);
musaError_t musaStreamWaitEvent(musaStream_t stream, musaEvent_t event, unsigned flags);
musaError_t musaStreamGetPriority(musaStream_t stream, int* priority);
musaError_t musaStreamGetDevice(musaStream_t stream, int* device);
musaError_t musaGetDefaultStream(int device, musaStream_t* stream);
// The driver's native handle (a cudaStream_t for the cuda driver, null for host).
musaError_t musaStreamGetNativeHandle(musaStream_t stream, void** handle);
// A musa stream over a native stream of the current device that the caller created and keeps
// owning (a cudaStream_t on the cuda driver; the host driver has none: musaErrorNotSupported).
// Destroying the musa stream leaves the native one alone.
musaError_t musaStreamCreateFromNative(musaStream_t* stream, void* native);
// musaSuccess if `stream` is a live stream of this runtime (created, not yet destroyed, or a
// default stream), musaErrorInvalidResourceHandle otherwise (not recorded as the last error). It
// never dereferences `stream`.
musaError_t musaStreamValidate(musaStream_t stream);

// Enqueues a host function as a task on the stream (CUDA's cudaLaunchHostFunc).
typedef void (*musaHostFn_t)(void* userData);
musaError_t musaLaunchHostFunc(musaStream_t stream, musaHostFn_t fn, void* userData);
// C++ convenience: enqueues any callable as a task on the stream. This is how
// kernels of the host driver are launched.
musaError_t musaLaunchTask(musaStream_t stream, std::function<void()> task, const char* name);
// Keeps the stream busy for about `cycles` device clock cycles without blocking the caller, as a
// spin kernel does (torch.musa._sleep): later work, events and synchronizations wait for it.
musaError_t musaStreamSpin(musaStream_t stream, unsigned long long cycles);

// ---- events ----
musaError_t musaEventCreate(musaEvent_t* event);
musaError_t musaEventCreateWithFlags(musaEvent_t* event, unsigned flags);
musaError_t musaEventDestroy(musaEvent_t event);
musaError_t musaEventRecord(musaEvent_t event, musaStream_t stream);
musaError_t musaEventQuery(musaEvent_t event);
musaError_t musaEventSynchronize(musaEvent_t event);
musaError_t musaEventElapsedTime(float* ms, musaEvent_t start, musaEvent_t end);

// ---- sharing between processes (CUDA IPC's calls) ----
// The allocation (musaMalloc, or one VMM mapping) that holds `ptr`: its base and size.
musaError_t musaMemGetAddressRange(void** base, size_t* size, const void* ptr);
// A handle to the whole allocation holding `ptr`; another process opens it at the allocation's base.
musaError_t musaIpcGetMemHandle(musaIpcMemHandle_t* handle, void* ptr);
// Maps another process's allocation into this one (current device's context); close with musaIpcCloseMemHandle.
musaError_t musaIpcOpenMemHandle(void** ptr, musaIpcMemHandle_t handle, unsigned flags);
musaError_t musaIpcCloseMemHandle(void* ptr);
// Events made with musaEventInterprocess | musaEventDisableTiming.
musaError_t musaIpcGetEventHandle(musaIpcEventHandle_t* handle, musaEvent_t event);
musaError_t musaIpcOpenEventHandle(musaEvent_t* event, musaIpcEventHandle_t handle);

// ---- stream capture and graphs ----
musaError_t musaStreamBeginCapture(musaStream_t stream);  // global mode
musaError_t musaStreamBeginCaptureWithMode(musaStream_t stream, musaStreamCaptureMode mode);
musaError_t musaStreamEndCapture(musaStream_t stream, musaGraph_t* graph);
musaError_t musaStreamIsCapturing(musaStream_t stream, musaStreamCaptureStatus* status);
// MUSA extension: *any = 0 when no stream of the process is capturing, else 1 (also where the
// driver keeps no count): a check made for every op skips the stream's own query with it.
musaError_t musaStreamAnyCapturing(int* any);
// Status and the capture's unique id (0 when not capturing); streams that
// joined a capture report its id.
musaError_t musaStreamGetCaptureInfo(musaStream_t stream, musaStreamCaptureStatus* status, unsigned long long* id);
// MUSA extension: marks the capture `stream` takes part in as invalidated
// (its end fails, naming `why`) -- for a layer above the runtime that refuses
// an operation during capture, as CUDA refuses a synchronizing call.
musaError_t musaStreamInvalidateCapture(musaStream_t stream, const char* why);
musaError_t musaGraphInstantiate(musaGraphExec_t* exec, musaGraph_t graph);
musaError_t musaGraphLaunch(musaGraphExec_t exec, musaStream_t stream);
musaError_t musaGraphGetNodeCount(musaGraph_t graph, size_t* count);
// Writes the graph as a Graphviz dot file (one node per captured task or kernel).
musaError_t musaGraphDebugDotPrint(musaGraph_t graph, const char* path);
musaError_t musaGraphDestroy(musaGraph_t graph);
musaError_t musaGraphExecDestroy(musaGraphExec_t exec);

}  // extern "C++"
