// The MUSA runtime API for extension code. Built for the cuda driver (nvcc, or the C++
// sources of such an extension) it is CUDA's runtime under musa names; built for the
// host driver it is torch_musa's runtime (libmusart), whose streams and memory are the
// emulated devices'.
#pragma once

#if defined(TORCH_MUSA_EXT_CUDA) || (defined(__CUDACC__) && !defined(TORCH_MUSA_EXT_HOST))
#include "musa_cuda/runtime_names.h"
#else
#include <musa/runtime.h>
#include "musa_simt/vector_types.h"
#endif
