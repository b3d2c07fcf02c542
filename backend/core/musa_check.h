// Turns runtime error codes into torch exceptions that say what failed.
#pragma once

#include <c10/util/Exception.h>
#include <musa/runtime.h>

#define MUSA_CHECK(expr)                                                          \
  do {                                                                            \
    musaError_t __err = (expr);                                                   \
    if (C10_UNLIKELY(__err != musaSuccess)) {                                     \
      const char* __msg = musaGetLastErrorMessage();                              \
      (void)musaGetLastError();                                                   \
      TORCH_CHECK(false, "MUSA error: ", musaGetErrorName(__err), " (",           \
                  musaGetErrorString(__err), ")", (__msg && *__msg ? ": " : ""), \
                  __msg, "\n  while running: " #expr);                            \
    }                                                                             \
  } while (0)
