// Error checks for extension code: a failing musa call or kernel launch raises a
// c10::Error (RuntimeError in Python) naming the error, with the runtime's detailed
// message where the driver gives one; the process stays usable.
#pragma once

#include <c10/util/Exception.h>

#include <musa_runtime.h>

namespace c10::musa::detail {
inline const char* last_error_detail() {
#if defined(TORCH_MUSA_EXT_CUDA)
  return "";
#else
  return musaGetLastErrorMessage();
#endif
}
}  // namespace c10::musa::detail

#define C10_MUSA_CHECK(EXPR)                                                                              \
  do {                                                                                                    \
    const musaError_t musa_check_err_ = (EXPR);                                                           \
    if (musa_check_err_ != musaSuccess) {                                                                 \
      const char* musa_check_detail_ = ::c10::musa::detail::last_error_detail();                          \
      TORCH_CHECK(false, "MUSA error: ", musaGetErrorString(musa_check_err_), " (",                       \
                  musaGetErrorName(musa_check_err_), ")", (*musa_check_detail_ ? ": " : ""),              \
                  musa_check_detail_);                                                                    \
    }                                                                                                     \
  } while (0)

#define C10_MUSA_KERNEL_LAUNCH_CHECK() C10_MUSA_CHECK(musaGetLastError())
#define MUSA_KERNEL_LAUNCH_CHECK C10_MUSA_KERNEL_LAUNCH_CHECK
