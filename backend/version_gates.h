// The one place torch-version differences are decided (torch 2.11 .. 2.13).
#pragma once

#include <torch/version.h>

#define TORCH_MUSA_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||             \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if !TORCH_MUSA_TORCH_AT_LEAST(2, 11)
#error "torch_musa supports torch 2.11 to 2.13; this torch is older. Install torch==2.11.* or newer."
#endif
