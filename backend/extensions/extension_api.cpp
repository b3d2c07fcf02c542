// The C entry points extension code reaches through torch_musa's headers
// (torch_musa/include/torch_musa/csrc/core/MUSAStream.h). They are exported from _C
// with C names so that an extension finds them with dlsym on the already loaded
// module instead of linking against it (_C is loaded RTLD_LOCAL by Python).
#include <c10/core/Stream.h>
#include <musa/runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>

#include "core/stream.h"

#define TORCH_MUSA_EXT_API extern "C" __attribute__((visibility("default")))

// Bumped when a signature below changes; the headers check it.
TORCH_MUSA_EXT_API int torch_musa_ext_api_version() { return 1; }

// The handles behind musa stream `id` of `device`: the runtime's musaStream_t and the
// driver's native handle (cudaStream_t on the cuda driver, null on the host driver).
// Returns 0, or -1 with a message in `error` (of `error_len` bytes).
TORCH_MUSA_EXT_API int torch_musa_ext_stream_handles(int64_t id, int device, void** runtime_stream,
                                                     void** native_stream, char* error, size_t error_len) {
  try {
    c10::Stream s(c10::Stream::UNSAFE,
                  c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)),
                  static_cast<c10::StreamId>(id));
    musaStream_t rs = torch_musa::native_stream(s);
    void* native = nullptr;
    if (musaStreamGetNativeHandle(rs, &native) != musaSuccess) {
      std::snprintf(error, error_len, "musaStreamGetNativeHandle failed: %s", musaGetLastErrorMessage());
      (void)musaGetLastError();
      return -1;
    }
    // (The host driver's default stream is null, as Stream.musa_stream says: user_stream_handle.)
    if (runtime_stream) *runtime_stream = native == nullptr ? torch_musa::user_stream_handle(s) : static_cast<void*>(rs);
    if (native_stream) *native_stream = native;
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_len, "%s", e.what());
    return -1;
  }
}
