// The one place torch-version differences are decided (torch 2.11 .. 2.15).
#pragma once

#include <torch/version.h>

#include <type_traits>
#include <utility>

#define TORCH_MUSA_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||             \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if !TORCH_MUSA_TORCH_AT_LEAST(2, 11)
#error "torch_musa supports torch 2.11 to 2.15; this torch is older. Install torch==2.11.* or newer."
#endif
#if TORCH_MUSA_TORCH_AT_LEAST(2, 16)
#error "torch_musa supports torch 2.11 to 2.15; this torch is newer. Install torch==2.15.* or older."
#endif

// ATen's backend-neutral graph interface (torch.accelerator.Graph) exists from 2.12.
#define TORCH_MUSA_HAS_GRAPH_IMPL_INTERFACE TORCH_MUSA_TORCH_AT_LEAST(2, 12)
// Until 2.14 a CUDA graph's random kernels need their generator registered
// with the graph before capture (at::cuda::CUDAGraph::register_generator_state
// by generator); from 2.14 a generator registers itself when first used in a capture.
#define TORCH_MUSA_CUDA_GRAPH_REGISTERS_GENERATORS (!TORCH_MUSA_TORCH_AT_LEAST(2, 14))

// Autocast ops CUDA registers beside ATen's shared op lists (autocast_mode.h),
// which musa registers the same way: fp32 ops new in a release.
#if TORCH_MUSA_TORCH_AT_LEAST(2, 14)
#define TORCH_MUSA_FORALL_EXTRA_AUTOCAST_FP32(_) _(linalg_matrix_sqrth)
#else
#define TORCH_MUSA_FORALL_EXTRA_AUTOCAST_FP32(_)
#endif

// torch's PrivateUse1 profiler registry (torch/csrc/profiler/standalone/
// privateuse1_profiler.h) forwards a backend's Kineto plugin to Kineto; without
// it (torch 2.11) the plugin registers with Kineto's API itself.
#if __has_include(<torch/csrc/profiler/standalone/privateuse1_profiler.h>)
#define TORCH_MUSA_HAS_PRIVATEUSE1_PROFILER_REGISTRY 1
#else
#define TORCH_MUSA_HAS_PRIVATEUSE1_PROFILER_REGISTRY 0
#endif

// Named tensors are gone from torch 2.13 (no Tensor::has_names, no ATen/core/NamedTensor.h).
#if __has_include(<ATen/core/NamedTensor.h>)
#define TORCH_MUSA_TENSOR_HAS_NAMES(t) ((t).has_names())
#else
#define TORCH_MUSA_TENSOR_HAS_NAMES(t) false
#endif
// ... and with them the names parameter of structured kernels' set_output_raw_strided (torch <= 2.12
// has it, defaulted), which an override must repeat.
#if __has_include(<ATen/core/NamedTensor.h>)
#define TORCH_MUSA_SET_OUTPUT_NAMES_PARAM , at::DimnameList names
#define TORCH_MUSA_SET_OUTPUT_NAMES_ARG , names
#else
#define TORCH_MUSA_SET_OUTPUT_NAMES_PARAM
#define TORCH_MUSA_SET_OUTPUT_NAMES_ARG
#endif

// ATen's pinned-cache statistics (at::HostStats) with the names torch.cuda.host_memory_stats
// reports (active_requests, active_bytes, allocations, allocated_bytes); an older HostStats
// counted differently, and musa then names the torch it needs.
template <class Stats, class = void>
struct TorchMusaHostStatsHaveRequests : std::false_type {};
template <class Stats>
struct TorchMusaHostStatsHaveRequests<Stats, std::void_t<decltype(std::declval<Stats&>().active_requests)>>
    : std::true_type {};
