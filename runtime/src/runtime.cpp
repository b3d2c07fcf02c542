// Front end of the MUSA runtime: driver selection, device numbering
// (MUSA_VISIBLE_DEVICES), per-thread current device and error state, and
// argument checks shared by every driver.
#include "driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_set>
#include <string>
#include <vector>

namespace musa_rt {
namespace {

thread_local musaError_t t_last_error = musaSuccess;
thread_local std::string t_last_message;
thread_local int t_device = 0;

struct State {
  std::unique_ptr<Driver> driver;
  void* plugin = nullptr;             // dlopen handle of the cuda driver, if used
  std::vector<int> visible;           // logical -> physical device
  std::vector<MUstream_st*> defaults; // per logical device
  std::mutex live_mu;                 // guards live_streams
  std::unordered_set<const MUstream_st*> live_streams;  // every stream not yet destroyed
  std::vector<std::atomic<int>> touched;
  std::string init_error;
  std::string built = "host";
  explicit State() : touched(64) {}
};

std::string pluginPath() {
  if (const char* p = std::getenv("TORCH_MUSA_CUDA_DRIVER_LIB")) return p;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&pluginPath), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    auto slash = self.rfind('/');
    std::string dir = slash == std::string::npos ? "." : self.substr(0, slash);
    return dir + "/libmusa_cuda_driver.so";
  }
  return "libmusa_cuda_driver.so";
}

std::unique_ptr<Driver> loadCudaDriver(State& st, std::string* why) {
  std::string path = pluginPath();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *why = std::string("the cuda driver is not built or cannot load (") + dlerror() + ")";
    return nullptr;
  }
  auto make = reinterpret_cast<MakeDriverFn>(dlsym(h, "musa_make_cuda_driver"));
  if (!make) {
    *why = "libmusa_cuda_driver.so lacks musa_make_cuda_driver";
    dlclose(h);
    return nullptr;
  }
  Driver* d = make(why);
  if (!d) {
    dlclose(h);
    return nullptr;
  }
  st.plugin = h;
  return std::unique_ptr<Driver>(d);
}

// Parses MUSA_VISIBLE_DEVICES like CUDA_VISIBLE_DEVICES: a comma list of
// indices; parsing stops at the first invalid or out-of-range entry.
std::vector<int> parseVisible(const char* env, int physical) {
  std::vector<int> out;
  if (!env) {
    for (int i = 0; i < physical; ++i) out.push_back(i);
    return out;
  }
  std::stringstream ss(env);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || end == item.c_str() || v < 0 || v >= physical) break;
    bool dup = false;
    for (int x : out) dup |= (x == v);
    if (dup) break;
    out.push_back(static_cast<int>(v));
  }
  return out;
}

State& state() {
  static State* st = [] {
    auto* s = new State();  // leaked on purpose: used during static destruction
    if (void* h = dlopen(pluginPath().c_str(), RTLD_LAZY | RTLD_LOCAL)) {
      s->built = "host,cuda";
      dlclose(h);
    }
    const char* choice_env = std::getenv("TORCH_MUSA_DRIVER");
    std::string choice = choice_env ? choice_env : "auto";
    if (choice == "cuda" || choice == "auto") {
      std::string why;
      s->driver = loadCudaDriver(*s, &why);
      if (!s->driver && choice == "cuda") {
        s->init_error = "TORCH_MUSA_DRIVER=cuda but " + why +
                        "; build torch_musa on a machine with CUDA and a CUDA-enabled torch, "
                        "or set TORCH_MUSA_DRIVER=host";
      }
    } else if (choice != "host") {
      s->init_error = "TORCH_MUSA_DRIVER='" + choice + "' is not one of auto, host, cuda";
    }
    if (!s->driver && s->init_error.empty()) s->driver = makeHostDriver(&s->init_error);
    if (!s->driver && s->init_error.empty()) s->init_error = "no MUSA driver could be started";
    if (s->driver) {
      s->visible = parseVisible(std::getenv("MUSA_VISIBLE_DEVICES"), s->driver->deviceCount());
      s->defaults.assign(s->visible.size(), nullptr);
    }
    return s;
  }();
  return *st;
}

musaError_t record(musaError_t err) {
  if (err != musaSuccess) t_last_error = err;
  return err;
}

}  // namespace

musaError_t fail(musaError_t err, const std::string& message) {
  t_last_message = message;
  t_last_error = err;
  return err;
}

}  // namespace musa_rt

using namespace musa_rt;

#define MUSA_DRIVER_OR_FAIL()                                                        \
  State& st = state();                                                               \
  if (!st.driver) return fail(musaErrorInitializationError, st.init_error);          \
  Driver& drv = *st.driver;                                                          \
  (void)drv

namespace {

musaError_t checkDevice(State& st, int device) {
  if (st.visible.empty())
    return fail(musaErrorNoDevice, "no MUSA device is visible (check MUSA_VISIBLE_DEVICES)");
  if (device < 0 || device >= static_cast<int>(st.visible.size())) {
    return fail(musaErrorInvalidDevice,
                "invalid device ordinal " + std::to_string(device) + ": there are " +
                    std::to_string(st.visible.size()) + " MUSA device(s), valid indices are 0.." +
                    std::to_string(st.visible.size() - 1));
  }
  return musaSuccess;
}

int physical(State& st, int logical) { return st.visible[logical]; }

int logicalOf(State& st, int phys) {
  for (size_t i = 0; i < st.visible.size(); ++i)
    if (st.visible[i] == phys) return static_cast<int>(i);
  return -1;
}

MUstream_st* defaultStream(State& st, int logical) {
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  MUstream_st*& s = st.defaults[logical];
  if (!s) {
    auto* ns = new MUstream_st();
    ns->device = physical(st, logical);
    ns->is_default = true;
    if (st.driver->streamCreate(ns) != musaSuccess) {
      delete ns;
      return nullptr;
    }
    s = ns;
    std::lock_guard<std::mutex> live(st.live_mu);
    st.live_streams.insert(ns);
  }
  return s;
}

// Resolves a null stream to the current device's default stream.
MUstream_st* resolve(State& st, musaStream_t s) {
  if (s) return s;
  if (checkDevice(st, t_device) != musaSuccess) return nullptr;
  return defaultStream(st, t_device);
}

void touch(State& st, int logical) {
  if (logical >= 0 && logical < static_cast<int>(st.touched.size())) st.touched[logical] = 1;
}

}  // namespace

#define RESOLVE_STREAM(var, s)                                                              \
  MUstream_st* var = resolve(st, s);                                                        \
  if (!var) return fail(musaErrorInvalidResourceHandle, "could not resolve the default stream")

const char* musaGetErrorName(musaError_t e) {
  switch (e) {
#define N(x) case x: return #x;
    N(musaSuccess) N(musaErrorInvalidValue) N(musaErrorMemoryAllocation)
    N(musaErrorInitializationError) N(musaErrorInvalidConfiguration) N(musaErrorIllegalAddress)
    N(musaErrorLaunchFailure) N(musaErrorInvalidDevice) N(musaErrorNoDevice)
    N(musaErrorInvalidResourceHandle) N(musaErrorNotReady) N(musaErrorNotSupported)
    N(musaErrorStreamCaptureUnsupported) N(musaErrorStreamCaptureInvalidated)
    N(musaErrorStreamCaptureUnmatched) N(musaErrorStreamCaptureUnjoined) N(musaErrorStreamCaptureImplicit)
    N(musaErrorCapturedEvent) N(musaErrorUnknown)
#undef N
  }
  return "musaErrorUnrecognized";
}

const char* musaGetErrorString(musaError_t e) {
  switch (e) {
    case musaSuccess: return "no error";
    case musaErrorInvalidValue: return "invalid argument";
    case musaErrorMemoryAllocation: return "out of memory";
    case musaErrorInitializationError: return "initialization error";
    case musaErrorInvalidConfiguration: return "invalid configuration argument";
    case musaErrorIllegalAddress: return "an illegal memory access was encountered";
    case musaErrorLaunchFailure: return "unspecified launch failure";
    case musaErrorInvalidDevice: return "invalid device ordinal";
    case musaErrorNoDevice: return "no MUSA-capable device is detected";
    case musaErrorInvalidResourceHandle: return "invalid resource handle";
    case musaErrorNotReady: return "device not ready";
    case musaErrorNotSupported: return "operation not supported";
    case musaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case musaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case musaErrorStreamCaptureUnmatched: return "capture was not initiated in this stream";
    case musaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
    case musaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case musaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
    case musaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}

const char* musaGetLastErrorMessage() { return t_last_message.c_str(); }
musaError_t musaGetLastError() {
  musaError_t e = t_last_error;
  t_last_error = musaSuccess;
  return e;
}
musaError_t musaPeekAtLastError() { return t_last_error; }
musaError_t musaSetLastError(musaError_t e, const char* message) {
  if (e == musaSuccess) return musaSuccess;
  return fail(e, message ? message : "");
}

musaError_t musaRuntimeGetVersion(int* version) {
  if (!version) return fail(musaErrorInvalidValue, "musaRuntimeGetVersion: version is null");
  *version = MUSART_VERSION;
  return musaSuccess;
}

const char* musaGetDriverName() {
  State& st = state();
  return st.driver ? st.driver->name() : "none";
}
const char* musaGetBuiltDrivers() { return state().built.c_str(); }

musaError_t musaGetDeviceCount(int* count) {
  if (!count) return fail(musaErrorInvalidValue, "musaGetDeviceCount: count is null");
  MUSA_DRIVER_OR_FAIL();
  *count = static_cast<int>(st.visible.size());
  return musaSuccess;
}

musaError_t musaGetDevice(int* device) {
  if (!device) return fail(musaErrorInvalidValue, "musaGetDevice: device is null");
  *device = t_device;
  return musaSuccess;
}

musaError_t musaSetDevice(int device) {
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, device)) return e;
  if (auto e = record(drv.setDevice(physical(st, device)))) return e;
  t_device = device;
  touch(st, device);
  return musaSuccess;
}

musaError_t musaDeviceIsInitialized(int device, int* initialized) {
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, device)) return e;
  *initialized = st.touched[device].load();
  return musaSuccess;
}

musaError_t musaDeviceGetDriverOrdinal(int device, int* ordinal) {
  if (!ordinal) return fail(musaErrorInvalidValue, "musaDeviceGetDriverOrdinal: ordinal is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, device)) return e;
  *ordinal = physical(st, device);
  return musaSuccess;
}

musaError_t musaGetDeviceProperties(musaDeviceProp* prop, int device) {
  if (!prop) return fail(musaErrorInvalidValue, "musaGetDeviceProperties: prop is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, device)) return e;
  std::memset(prop, 0, sizeof(*prop));
  return record(drv.properties(physical(st, device), prop));
}

musaError_t musaDeviceSynchronize() {
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  return record(drv.deviceSynchronize(physical(st, t_device)));
}

musaError_t musaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  MUSA_DRIVER_OR_FAIL();
  int l = 0, g = 0;
  drv.priorityRange(&l, &g);
  if (least) *least = l;
  if (greatest) *greatest = g;
  return musaSuccess;
}

musaError_t musaMalloc(void** ptr, size_t size) {
  if (!ptr) return fail(musaErrorInvalidValue, "musaMalloc: ptr is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  touch(st, t_device);
  if (size == 0) {
    *ptr = nullptr;
    return musaSuccess;
  }
  return record(drv.malloc(physical(st, t_device), ptr, size));
}

musaError_t musaFree(void* ptr) {
  if (!ptr) return musaSuccess;
  MUSA_DRIVER_OR_FAIL();
  return record(drv.free(ptr));
}

musaError_t musaMemGetInfo(size_t* free, size_t* total) {
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  size_t f = 0, t = 0;
  if (auto e = record(drv.memGetInfo(physical(st, t_device), &f, &t))) return e;
  if (free) *free = f;
  if (total) *total = t;
  return musaSuccess;
}

musaError_t musaHostAlloc(void** ptr, size_t size) { return musaHostAlloc(ptr, size, musaHostAllocPortable); }

musaError_t musaHostAlloc(void** ptr, size_t size, unsigned flags) {
  if (!ptr) return fail(musaErrorInvalidValue, "musaHostAlloc: ptr is null");
  if (flags & ~(musaHostAllocPortable | musaHostAllocMapped))
    return fail(musaErrorInvalidValue, "musaHostAlloc: unknown flags " + std::to_string(flags) +
                                           " (musaHostAllocPortable | musaHostAllocMapped)");
  MUSA_DRIVER_OR_FAIL();
  if (size == 0) {
    *ptr = nullptr;
    return musaSuccess;
  }
  return record(drv.hostAlloc(ptr, size, flags));
}

musaError_t musaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned flags) {
  if (!device_ptr || !host_ptr) return fail(musaErrorInvalidValue, "musaHostGetDevicePointer: a pointer is null");
  if (flags != 0) return fail(musaErrorInvalidValue, "musaHostGetDevicePointer: flags must be 0");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.hostGetDevicePointer(device_ptr, host_ptr));
}

musaError_t musaFreeHost(void* ptr) {
  if (!ptr) return musaSuccess;
  MUSA_DRIVER_OR_FAIL();
  return record(drv.hostFree(ptr));
}

musaError_t musaPointerGetAttributes(musaPointerAttributes* attr, const void* ptr) {
  if (!attr) return fail(musaErrorInvalidValue, "musaPointerGetAttributes: attr is null");
  MUSA_DRIVER_OR_FAIL();
  musaPointerAttributes a{musaMemoryTypeUnregistered, -1};
  if (auto e = record(drv.pointerAttributes(ptr, &a))) return e;
  if (a.type == musaMemoryTypeDevice) a.device = logicalOf(st, a.device);
  *attr = a;
  return musaSuccess;
}

musaError_t musaMemcpy(void* dst, const void* src, size_t n, musaMemcpyKind kind) {
  if (n == 0) return musaSuccess;
  if (!dst || !src) return fail(musaErrorInvalidValue, "musaMemcpy: null pointer");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.memcpy(dst, src, n, kind, nullptr));
}

musaError_t musaMemcpyAsync(void* dst, const void* src, size_t n, musaMemcpyKind kind,
                            musaStream_t stream) {
  if (n == 0) return musaSuccess;
  if (!dst || !src) return fail(musaErrorInvalidValue, "musaMemcpyAsync: null pointer");
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.memcpy(dst, src, n, kind, s));
}

musaError_t musaMemset(void* dst, int value, size_t n) {
  if (n == 0) return musaSuccess;
  if (!dst) return fail(musaErrorInvalidValue, "musaMemset: null pointer");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.memset(dst, value, n, nullptr));
}

musaError_t musaMemsetAsync(void* dst, int value, size_t n, musaStream_t stream) {
  if (n == 0) return musaSuccess;
  if (!dst) return fail(musaErrorInvalidValue, "musaMemsetAsync: null pointer");
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.memset(dst, value, n, s));
}

musaError_t musaMemGetAllocationGranularity(size_t* g, int device) {
  if (!g) return fail(musaErrorInvalidValue, "granularity is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, device)) return e;
  return record(drv.granularity(physical(st, device), g));
}

musaError_t musaMemAddressReserve(void** ptr, size_t size, size_t alignment) {
  if (!ptr || size == 0) return fail(musaErrorInvalidValue, "musaMemAddressReserve: bad arguments");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.addressReserve(ptr, size, alignment));
}

musaError_t musaMemAddressFree(void* ptr, size_t size) {
  MUSA_DRIVER_OR_FAIL();
  return record(drv.addressFree(ptr, size));
}

musaError_t musaMemCreate(musaMemGenericAllocationHandle_t* h, size_t size, int device) {
  if (!h || size == 0) return fail(musaErrorInvalidValue, "musaMemCreate: bad arguments");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, device)) return e;
  touch(st, device);
  return record(drv.memCreate(h, size, physical(st, device)));
}

musaError_t musaMemRelease(musaMemGenericAllocationHandle_t h) {
  MUSA_DRIVER_OR_FAIL();
  return record(drv.memRelease(h));
}

musaError_t musaMemExportToShareableHandle(musaIpcMemHandle_t* shareable, musaMemGenericAllocationHandle_t h) {
  if (!shareable) return fail(musaErrorInvalidValue, "musaMemExportToShareableHandle: shareable is null");
  MUSA_DRIVER_OR_FAIL();
  std::memset(shareable, 0, sizeof(*shareable));
  return record(drv.memExport(shareable, h));
}

musaError_t musaMemImportFromShareableHandle(musaMemGenericAllocationHandle_t* h, musaIpcMemHandle_t shareable) {
  if (!h) return fail(musaErrorInvalidValue, "musaMemImportFromShareableHandle: handle is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  touch(st, t_device);
  return record(drv.memImport(physical(st, t_device), h, shareable));
}

musaError_t musaMemMap(void* ptr, size_t size, size_t offset, musaMemGenericAllocationHandle_t h) {
  MUSA_DRIVER_OR_FAIL();
  return record(drv.memMap(ptr, size, offset, h));
}

musaError_t musaMemUnmap(void* ptr, size_t size) {
  MUSA_DRIVER_OR_FAIL();
  return record(drv.memUnmap(ptr, size));
}

musaError_t musaMemSetAccess(void* ptr, size_t size, int device) {
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, device)) return e;
  return record(drv.memSetAccess(ptr, size, physical(st, device)));
}

musaError_t musaStreamCreate(musaStream_t* stream) {
  return musaStreamCreateWithPriority(stream, musaStreamDefault, 0);
}

musaError_t musaStreamCreateWithPriority(musaStream_t* stream, unsigned flags, int priority) {
  if (!stream) return fail(musaErrorInvalidValue, "musaStreamCreate: stream is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  int least = 0, greatest = 0;
  drv.priorityRange(&least, &greatest);
  auto s = std::make_unique<MUstream_st>();
  s->device = physical(st, t_device);
  s->flags = flags;
  // Clamp like CUDA: out-of-range priorities take the nearest valid one.
  s->priority = priority > least ? least : (priority < greatest ? greatest : priority);
  if (auto e = record(drv.streamCreate(s.get()))) return e;
  touch(st, t_device);
  *stream = s.release();
  std::lock_guard<std::mutex> live(st.live_mu);
  st.live_streams.insert(*stream);
  return musaSuccess;
}

musaError_t musaStreamCreateFromNative(musaStream_t* stream, void* native) {
  if (!stream) return fail(musaErrorInvalidValue, "musaStreamCreateFromNative: stream is null");
  if (!native)
    return fail(musaErrorInvalidValue,
                "musaStreamCreateFromNative: the native stream is null; the default stream is "
                "musaGetDefaultStream's");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  auto s = std::make_unique<MUstream_st>();
  s->device = physical(st, t_device);
  if (auto e = record(drv.streamWrap(s.get(), native))) return e;
  touch(st, t_device);
  *stream = s.release();
  std::lock_guard<std::mutex> live(st.live_mu);
  st.live_streams.insert(*stream);
  return musaSuccess;
}

musaError_t musaStreamValidate(musaStream_t stream) {
  if (!stream) return musaSuccess;  // the current device's default stream
  MUSA_DRIVER_OR_FAIL();
  std::lock_guard<std::mutex> live(st.live_mu);
  // (A query, like musaStreamQuery's NotReady: the answer is not recorded as the last error.)
  return st.live_streams.count(stream) ? musaSuccess : musaErrorInvalidResourceHandle;
}

musaError_t musaStreamDestroy(musaStream_t stream) {
  if (!stream) return fail(musaErrorInvalidResourceHandle, "cannot destroy the default stream");
  if (stream->is_default) return fail(musaErrorInvalidResourceHandle, "cannot destroy a default stream");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = record(drv.streamDestroy(stream))) return e;
  {
    std::lock_guard<std::mutex> live(st.live_mu);
    st.live_streams.erase(stream);
  }
  delete stream;
  return musaSuccess;
}

musaError_t musaStreamQuery(musaStream_t stream) {
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return drv.streamQuery(s);  // NotReady is not an error to remember
}

musaError_t musaStreamSynchronize(musaStream_t stream) {
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.streamSynchronize(s));
}

musaError_t musaStreamWaitEvent(musaStream_t stream, musaEvent_t event, unsigned) {
  if (!event) return fail(musaErrorInvalidResourceHandle, "musaStreamWaitEvent: event is null");
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.streamWaitEvent(s, event));
}

musaError_t musaStreamGetPriority(musaStream_t stream, int* priority) {
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  *priority = s->priority;
  return musaSuccess;
}

musaError_t musaStreamGetDevice(musaStream_t stream, int* device) {
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  *device = logicalOf(st, s->device);
  return musaSuccess;
}

musaError_t musaGetDefaultStream(int device, musaStream_t* stream) {
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, device)) return e;
  *stream = defaultStream(st, device);
  return *stream ? musaSuccess : fail(musaErrorUnknown, "default stream creation failed");
}

musaError_t musaStreamGetNativeHandle(musaStream_t stream, void** handle) {
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  *handle = s->native;
  return musaSuccess;
}

musaError_t musaLaunchHostFunc(musaStream_t stream, musaHostFn_t fn, void* user) {
  if (!fn) return fail(musaErrorInvalidValue, "musaLaunchHostFunc: fn is null");
  return musaLaunchTask(stream, [fn, user] { fn(user); }, "host_func");
}

musaError_t musaLaunchTask(musaStream_t stream, std::function<void()> task, const char* name) {
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.launchTask(s, std::move(task), name ? name : "task"));
}

musaError_t musaStreamSpin(musaStream_t stream, unsigned long long cycles) {
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.streamSpin(s, cycles));
}

musaError_t musaEventCreate(musaEvent_t* event) {
  return musaEventCreateWithFlags(event, musaEventDefault);
}

musaError_t musaEventCreateWithFlags(musaEvent_t* event, unsigned flags) {
  if (!event) return fail(musaErrorInvalidValue, "musaEventCreate: event is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  if ((flags & musaEventInterprocess) && !(flags & musaEventDisableTiming))
    return fail(musaErrorInvalidValue,
                "musaEventCreateWithFlags: an interprocess event must also disable timing (as CUDA's)");
  auto ev = std::make_unique<MUevent_st>();
  ev->device = physical(st, t_device);
  ev->flags = flags;
  if (auto e = record(drv.eventCreate(ev.get()))) return e;
  *event = ev.release();
  return musaSuccess;
}

musaError_t musaEventDestroy(musaEvent_t event) {
  if (!event) return fail(musaErrorInvalidResourceHandle, "musaEventDestroy: event is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = record(drv.eventDestroy(event))) return e;
  delete event;
  return musaSuccess;
}

musaError_t musaEventRecord(musaEvent_t event, musaStream_t stream) {
  if (!event) return fail(musaErrorInvalidResourceHandle, "musaEventRecord: event is null");
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  if (s->device != event->device)
    return fail(musaErrorInvalidResourceHandle,
                "musaEventRecord: the event and the stream belong to different devices");
  return record(drv.eventRecord(event, s));
}

musaError_t musaEventQuery(musaEvent_t event) {
  if (!event) return fail(musaErrorInvalidResourceHandle, "musaEventQuery: event is null");
  MUSA_DRIVER_OR_FAIL();
  return drv.eventQuery(event);
}

musaError_t musaEventSynchronize(musaEvent_t event) {
  if (!event) return fail(musaErrorInvalidResourceHandle, "musaEventSynchronize: event is null");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.eventSynchronize(event));
}

musaError_t musaEventElapsedTime(float* ms, musaEvent_t a, musaEvent_t b) {
  if (!ms || !a || !b) return fail(musaErrorInvalidValue, "musaEventElapsedTime: null argument");
  if ((a->flags | b->flags) & musaEventDisableTiming)
    return fail(musaErrorInvalidResourceHandle,
                "elapsed time needs both events created with timing enabled "
                "(enable_timing=True)");
  if (!a->recorded || !b->recorded)
    return fail(musaErrorInvalidResourceHandle,
                "elapsed time needs both events to have been recorded");
  if (a->device != b->device)  // as CUDA's: two devices' clocks are not one timeline
    return fail(musaErrorInvalidResourceHandle,
                "elapsed time needs both events recorded on the same device; time each device with its own pair");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.eventElapsed(ms, a, b));
}

// ---- sharing between processes ----

musaError_t musaMemGetAddressRange(void** base, size_t* size, const void* ptr) {
  if (!base || !size || !ptr) return fail(musaErrorInvalidValue, "musaMemGetAddressRange: null argument");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.memGetAddressRange(ptr, base, size));
}

musaError_t musaIpcGetMemHandle(musaIpcMemHandle_t* handle, void* ptr) {
  if (!handle || !ptr) return fail(musaErrorInvalidValue, "musaIpcGetMemHandle: null argument");
  MUSA_DRIVER_OR_FAIL();
  std::memset(handle, 0, sizeof(*handle));
  return record(drv.ipcGetMemHandle(handle, ptr));
}

musaError_t musaIpcOpenMemHandle(void** ptr, musaIpcMemHandle_t handle, unsigned) {
  if (!ptr) return fail(musaErrorInvalidValue, "musaIpcOpenMemHandle: ptr is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  touch(st, t_device);
  return record(drv.ipcOpenMemHandle(physical(st, t_device), ptr, handle));
}

musaError_t musaIpcCloseMemHandle(void* ptr) {
  if (!ptr) return fail(musaErrorInvalidValue, "musaIpcCloseMemHandle: ptr is null");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.ipcCloseMemHandle(ptr));
}

musaError_t musaIpcGetEventHandle(musaIpcEventHandle_t* handle, musaEvent_t event) {
  if (!handle || !event) return fail(musaErrorInvalidValue, "musaIpcGetEventHandle: null argument");
  if (!(event->flags & musaEventInterprocess) || !(event->flags & musaEventDisableTiming))
    return fail(musaErrorInvalidResourceHandle,
                "musaIpcGetEventHandle: the event was not created with musaEventInterprocess | "
                "musaEventDisableTiming (torch.musa.Event(interprocess=True))");
  MUSA_DRIVER_OR_FAIL();
  std::memset(handle, 0, sizeof(*handle));
  return record(drv.ipcGetEventHandle(handle, event));
}

musaError_t musaIpcOpenEventHandle(musaEvent_t* event, musaIpcEventHandle_t handle) {
  if (!event) return fail(musaErrorInvalidValue, "musaIpcOpenEventHandle: event is null");
  MUSA_DRIVER_OR_FAIL();
  if (auto e = checkDevice(st, t_device)) return e;
  auto ev = std::make_unique<MUevent_st>();
  ev->device = physical(st, t_device);
  ev->flags = musaEventInterprocess | musaEventDisableTiming;
  if (auto e = record(drv.ipcOpenEventHandle(ev.get(), handle))) return e;
  *event = ev.release();
  return musaSuccess;
}

musaError_t musaStreamBeginCapture(musaStream_t stream) {
  return musaStreamBeginCaptureWithMode(stream, musaStreamCaptureModeGlobal);
}

musaError_t musaStreamBeginCaptureWithMode(musaStream_t stream, musaStreamCaptureMode mode) {
  if (mode < musaStreamCaptureModeGlobal || mode > musaStreamCaptureModeRelaxed)
    return fail(musaErrorInvalidValue, "musaStreamBeginCaptureWithMode: mode must be global, thread_local or relaxed");
  if (!stream) return fail(musaErrorStreamCaptureUnsupported, "the default (legacy) stream cannot be captured; capture on a side stream");
  MUSA_DRIVER_OR_FAIL();
  if (stream->is_default)
    return fail(musaErrorStreamCaptureUnsupported,
                "the default stream cannot be captured; capture on a side stream");
  return record(drv.beginCapture(stream, mode));
}

musaError_t musaStreamEndCapture(musaStream_t stream, musaGraph_t* graph) {
  if (!stream || !graph) return fail(musaErrorInvalidValue, "musaStreamEndCapture: null argument");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.endCapture(stream, graph));
}

musaError_t musaStreamIsCapturing(musaStream_t stream, musaStreamCaptureStatus* status) {
  if (!status) return fail(musaErrorInvalidValue, "status is null");
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.isCapturing(s, status));
}

musaError_t musaStreamAnyCapturing(int* any) {
  if (!any) return fail(musaErrorInvalidValue, "musaStreamAnyCapturing: any is null");
  MUSA_DRIVER_OR_FAIL();
  *any = drv.anyCapturing() ? 1 : 0;
  return musaSuccess;
}

musaError_t musaStreamGetCaptureInfo(musaStream_t stream, musaStreamCaptureStatus* status, unsigned long long* id) {
  if (!status || !id) return fail(musaErrorInvalidValue, "musaStreamGetCaptureInfo: null argument");
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.captureInfo(s, status, id));
}

musaError_t musaStreamInvalidateCapture(musaStream_t stream, const char* why) {
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.invalidateCapture(s, why ? why : "an operation refused during capture"));
}

musaError_t musaGraphInstantiate(musaGraphExec_t* exec, musaGraph_t graph) {
  if (!exec || !graph) return fail(musaErrorInvalidValue, "musaGraphInstantiate: null argument");
  MUSA_DRIVER_OR_FAIL();
  return record(drv.graphInstantiate(exec, graph));
}

musaError_t musaGraphLaunch(musaGraphExec_t exec, musaStream_t stream) {
  if (!exec) return fail(musaErrorInvalidValue, "musaGraphLaunch: exec is null");
  MUSA_DRIVER_OR_FAIL();
  RESOLVE_STREAM(s, stream);
  return record(drv.graphLaunch(exec, s));
}

musaError_t musaGraphGetNodeCount(musaGraph_t graph, size_t* count) {
  if (!graph || !count) return fail(musaErrorInvalidValue, "null argument");
  *count = graph->nodeCount();
  return musaSuccess;
}

musaError_t musaGraphDebugDotPrint(musaGraph_t graph, const char* path) {
  if (!graph || !path) return fail(musaErrorInvalidValue, "musaGraphDebugDotPrint: null argument");
  return record(graph->debugDump(path));
}

musaError_t musaGraphDestroy(musaGraph_t graph) {
  delete graph;
  return musaSuccess;
}

musaError_t musaGraphExecDestroy(musaGraphExec_t exec) {
  delete exec;
  return musaSuccess;
}
