// c10::musa::MUSAStream for extension code: torch's stream of the musa device
// (c10::Stream, through c10's device-guard interface) plus the handle kernels launch
// on: the runtime's musaStream_t on the host driver, the cudaStream_t behind it on the
// cuda driver. The handle comes from torch_musa._C's exported C entry point, found on
// the loaded module (an extension is not linked against _C).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <musa_runtime.h>

namespace c10::musa {
namespace detail {

using StreamHandlesFn = int (*)(int64_t, int, void**, void**, char*, size_t);

inline int find_torch_musa_module(struct dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (!name) return 0;
  const char* slash = std::strrchr(name, '/');
  if (!slash || std::strncmp(slash + 1, "_C.", 3) != 0) return 0;
  std::string dir(name, slash);
  if (dir.size() < 11 || dir.compare(dir.size() - 11, 11, "/torch_musa") != 0) return 0;
  *static_cast<std::string*>(out) = name;
  return 1;
}

inline StreamHandlesFn stream_handles_fn() {
  static StreamHandlesFn fn = []() -> StreamHandlesFn {
    std::string path;
    dl_iterate_phdr(&find_torch_musa_module, &path);
    TORCH_CHECK(!path.empty(), "torch_musa's _C module is not loaded: import torch (or torch_musa) before using musa streams");
    void* h = dlopen(path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
    TORCH_CHECK(h, "cannot open torch_musa's _C module (", path, "): ", dlerror());
    auto version = reinterpret_cast<int (*)()>(dlsym(h, "torch_musa_ext_api_version"));
    auto f = reinterpret_cast<StreamHandlesFn>(dlsym(h, "torch_musa_ext_stream_handles"));
    TORCH_CHECK(version && f && version() == 1, "torch_musa's _C module (", path,
                ") does not offer the extension API these headers need (version 1): rebuild the extension "
                "against the installed torch_musa");
    return f;
  }();
  return fn;
}

inline musaStream_t raw_stream(const c10::Stream& s) {
  void* runtime = nullptr;
  void* native = nullptr;
  char error[512] = {0};
  int rc = stream_handles_fn()(s.id(), s.device_index(), &runtime, &native, error, sizeof(error));
  TORCH_CHECK(rc == 0, "musa stream ", s.id(), " of device ", static_cast<int>(s.device_index()), ": ", error);
#if defined(TORCH_MUSA_EXT_CUDA)
  TORCH_CHECK(native != nullptr,
              "this extension was built for the cuda driver, but the active musa driver has no CUDA streams "
              "(TORCH_MUSA_DRIVER=host?): rebuild it under the active driver");
  return static_cast<musaStream_t>(native);
#else
  TORCH_CHECK(native == nullptr,
              "this extension was built for the host driver (SIMT emulation), but the active musa driver is "
              "the cuda driver: rebuild it under the active driver");
  return static_cast<musaStream_t>(runtime);
#endif
}

inline const c10::impl::DeviceGuardImplInterface* guard_impl() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
}

inline c10::Device device_of(c10::DeviceIndex index) {
  if (index < 0) index = guard_impl()->getDevice().index();
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

}  // namespace detail

class MUSAStream {
 public:
  explicit MUSAStream(c10::Stream stream) : stream_(stream) {
    TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "MUSAStream: ", stream, " is not a musa stream");
  }
  // The handle kernels launch on (musaStream_t).
  musaStream_t stream() const { return detail::raw_stream(stream_); }
  operator musaStream_t() const { return stream(); }
  operator c10::Stream() const { return stream_; }
  c10::Stream unwrap() const { return stream_; }
  c10::Device device() const { return stream_.device(); }
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::StreamId id() const { return stream_.id(); }
  bool query() const { return stream_.query(); }
  void synchronize() const { stream_.synchronize(); }
  bool operator==(const MUSAStream& o) const { return stream_ == o.stream_; }
  bool operator!=(const MUSAStream& o) const { return stream_ != o.stream_; }

 private:
  c10::Stream stream_;
};

inline MUSAStream getCurrentMUSAStream(c10::DeviceIndex device = -1) {
  return MUSAStream(detail::guard_impl()->getStream(detail::device_of(device)));
}
inline MUSAStream getDefaultMUSAStream(c10::DeviceIndex device = -1) {
  return MUSAStream(detail::guard_impl()->getDefaultStream(detail::device_of(device)));
}
inline MUSAStream getStreamFromPool(bool isHighPriority = false, c10::DeviceIndex device = -1) {
  return MUSAStream(detail::guard_impl()->getStreamFromGlobalPool(detail::device_of(device), isHighPriority));
}
inline void setCurrentMUSAStream(MUSAStream stream) { detail::guard_impl()->exchangeStream(stream.unwrap()); }

}  // namespace c10::musa

namespace at::musa {
using c10::musa::getCurrentMUSAStream;
using c10::musa::getDefaultMUSAStream;
using c10::musa::getStreamFromPool;
using c10::musa::MUSAStream;
using c10::musa::setCurrentMUSAStream;
}  // namespace at::musa
