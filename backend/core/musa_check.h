// Turns runtime error codes into torch exceptions that say what failed.
#pragma once

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <string>
#include <musa/runtime.h>

// Raises what a failed runtime call with error `code` raises (torch.AcceleratorError, a
// RuntimeError that carries the code, as for a failed CUDA call), with the message given.
#define MUSA_FAIL(code, ...)                                                                   \
  throw ::c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},         \
                                static_cast<int32_t>(code), ::c10::str(__VA_ARGS__))

#define MUSA_CHECK(expr)                                                                       \
  do {                                                                                         \
    musaError_t __err = (expr);                                                                \
    if (C10_UNLIKELY(__err != musaSuccess)) {                                                  \
      const char* __msg = musaGetLastErrorMessage();                                           \
      std::string __detail = __msg && *__msg ? std::string(": ") + __msg : std::string();      \
      (void)musaGetLastError();                                                                \
      MUSA_FAIL(__err, "MUSA error: ", musaGetErrorName(__err), " (", musaGetErrorString(__err), ")", \
                __detail, "\n  while running: " #expr);                                        \
    }                                                                                          \
  } while (0)
