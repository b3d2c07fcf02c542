// The extension corpus's kernels: one translation unit, built through setup.py
// (MUSAExtension) and through load_inline, on the host driver (SIMT emulation) and on
// the cuda driver (nvcc). Launchers take raw pointers and run on the current musa stream.
#include <musa_runtime.h>

#include "corpus_common.muh"
#include "torch_musa/csrc/core/MUSAException.h"
#include "torch_musa/csrc/core/MUSAStream.h"

// Elementwise: out = alpha * x + y (a template kernel, grid-stride loop).
template <typename T>
__global__ void axpy_kernel(const T* __restrict__ x, const T* __restrict__ y, T* __restrict__ out, T alpha,
                            int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x)
    out[i] = alpha * x[i] + y[i];
}

void launch_axpy(const float* x, const float* y, float* out, float alpha, int64_t n) {
  const int threads = 256;
  const int blocks = static_cast<int>(corpus::ceil_div(n, threads) < 1024 ? corpus::ceil_div(n, threads) : 1024);
  axpy_kernel<float><<<blocks, threads, 0, c10::musa::getCurrentMUSAStream()>>>(x, y, out, alpha, n);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}

// Block reduction: one block per row, a tree over dynamic shared memory with __syncthreads.
__global__ void row_sum_kernel(const float* x, float* out, int cols) {
  extern __shared__ float partial[];
  const float* row = x + (int64_t)blockIdx.x * cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) v += row[c];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// threads must be a power of two; extra_shared asks for more dynamic shared memory
// than needed (the error tests).
void launch_row_sum(const float* x, float* out, int rows, int cols, int threads, int64_t extra_shared) {
  size_t shared = threads * sizeof(float) + extra_shared;
  row_sum_kernel<<<rows, threads, shared, c10::musa::getCurrentMUSAStream()>>>(x, out, cols);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}

// Warp-shuffle row softmax: one warp per row, max and sum through __shfl_xor_sync.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  const int warps = blockDim.x / warpSize;
  const int row = blockIdx.x * warps + threadIdx.x / warpSize;
  const int lane = threadIdx.x % warpSize;
  if (row >= rows) return;
  const float* in = x + (int64_t)row * cols;
  float m = -INFINITY;
  for (int c = lane; c < cols; c += warpSize) m = fmaxf(m, in[c]);
  m = corpus::warp_max(m);
  float s = 0.f;
  for (int c = lane; c < cols; c += warpSize) s += __expf(in[c] - m);
  s = corpus::warp_sum(s);
  const float inv = 1.f / s;
  float* o = out + (int64_t)row * cols;
  for (int c = lane; c < cols; c += warpSize) o[c] = __expf(in[c] - m) * inv;
}

void launch_softmax(const float* x, float* out, int rows, int cols) {
  const int warps_per_block = 4;
  dim3 block(32 * warps_per_block);
  dim3 grid((rows + warps_per_block - 1) / warps_per_block);
  softmax_kernel<<<grid, block, 0, c10::musa::getCurrentMUSAStream()>>>(x, out, rows, cols);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}

// Atomic histogram: per-block counts in static shared memory, merged with atomicAdd.
constexpr int kMaxBins = 256;
__global__ void histogram_kernel(const float* x, int* counts, int64_t n, int bins, float lo, float hi) {
  __shared__ int local[kMaxBins];
  for (int b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const float scale = bins / (hi - lo);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
    float v = x[i];
    if (v < lo || v > hi) continue;
    int b = min(static_cast<int>((v - lo) * scale), bins - 1);
    atomicAdd(&local[b], 1);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    if (local[b]) atomicAdd(&counts[b], local[b]);
}

void launch_histogram(const float* x, int* counts, int64_t n, int bins, float lo, float hi) {
  histogram_kernel<<<8, 256, 0, c10::musa::getCurrentMUSAStream()>>>(x, counts, n, bins, lo, hi);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}

// Warp votes: per warp, how many lanes hold a positive value (__ballot_sync + __popc),
// and whether any/all do.
__global__ void vote_kernel(const float* x, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const bool pos = i < n && x[i] > 0.f;
  const unsigned ballot = __ballot_sync(0xffffffffu, pos);
  const int any = __any_sync(0xffffffffu, pos), all = __all_sync(0xffffffffu, pos);
  if (threadIdx.x % warpSize == 0) {
    const int w = i / warpSize;
    out[3 * w] = __popc(ballot);
    out[3 * w + 1] = any;
    out[3 * w + 2] = all;
  }
}

void launch_vote(const float* x, int* out, int n) {
  vote_kernel<<<(n + 127) / 128, 128, 0, c10::musa::getCurrentMUSAStream()>>>(x, out, n);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}

// The handle of the stream this extension launches on (what getCurrentMUSAStream gives).
int64_t current_stream_handle() {
  return reinterpret_cast<int64_t>(static_cast<musaStream_t>(c10::musa::getCurrentMUSAStream()));
}

// Half of each warp waits at __syncthreads while the other half waits in a shuffle for
// them: the host emulation reports the deadlock as a kernel fault
// (musaErrorLaunchFailure); on a GPU it is undefined (host-only test).
__global__ void divergent_barrier_kernel(float* x) {
  if (threadIdx.x % 32 < 16)
    __syncthreads();
  else
    x[threadIdx.x] = __shfl_sync(0xffffffffu, 1.f, 0);
}

void launch_divergent_barrier(float* x) {
  divergent_barrier_kernel<<<1, 64, 0, c10::musa::getCurrentMUSAStream()>>>(x);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}

// A write through a null pointer: musaErrorIllegalAddress. On a GPU the error is sticky
// (the context is lost), so only the host emulation's test launches it.
__global__ void illegal_write_kernel(float* p) { p[threadIdx.x] = 1.f; }

void launch_illegal_write() {
  illegal_write_kernel<<<2, 32, 0, c10::musa::getCurrentMUSAStream()>>>(nullptr);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}

// Every atomic the emulation offers, on one set of counters: out = {min, max, count down,
// last exchanged, CAS-loop sum, AND, OR, XOR}, a float max (as a CAS loop: CUDA has no float
// atomicMax) and a 64-bit add.
__global__ void atomics_kernel(const int* v, int n, int* out, float* fmax_out, unsigned long long* total) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    const int x = v[i];
    atomicMin(&out[0], x);
    atomicMax(&out[1], x);
    atomicSub(&out[2], 1);
    atomicExch(&out[3], x);
    int seen = out[4], prev;
    do {  // an add written as a compare-and-swap loop
      prev = seen;
      seen = atomicCAS(&out[4], prev, prev + x);
    } while (seen != prev);
    atomicAnd(&out[5], ~(1 << (i % 31)));
    atomicOr(&out[6], 1 << (i % 31));
    atomicXor(&out[7], x);
    const float f = static_cast<float>(x) * 0.5f;
    int old_bits = __float_as_int(*fmax_out), assumed;
    do {
      assumed = old_bits;
      if (__int_as_float(assumed) >= f) break;
      old_bits = atomicCAS(reinterpret_cast<int*>(fmax_out), assumed, __float_as_int(f));
    } while (old_bits != assumed);
    atomicAdd(total, static_cast<unsigned long long>(x + 1000));
  }
}

void launch_atomics(const int* v, int n, int* out, float* fmax_out, unsigned long long* total) {
  atomics_kernel<<<4, 128, 0, c10::musa::getCurrentMUSAStream()>>>(v, n, out, fmax_out, total);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}

// Segmented inclusive scans: segments of `width` lanes (__shfl_up_sync with width), each
// segment's total broadcast from its last lane (__shfl_sync), __shfl_down_sync suffix sums,
// and the block's count of positive inputs (__syncthreads_count).
__global__ void scan_kernel(const float* x, float* scan, float* seg_total, float* suffix, int* positives, int width) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x % width;
  float v = x[i];
  for (int o = 1; o < width; o *= 2) {
    float up = __shfl_up_sync(0xffffffffu, v, o, width);
    if (lane >= o) v += up;
  }
  scan[i] = v;
  seg_total[i] = __shfl_sync(0xffffffffu, v, width - 1, width);
  float s = x[i];
  for (int o = 1; o < width; o *= 2) {
    float down = __shfl_down_sync(0xffffffffu, s, o, width);
    if (lane + o < width) s += down;
  }
  suffix[i] = s;
  const int count = __syncthreads_count(x[i] > 0.f);
  if (threadIdx.x == 0) positives[blockIdx.x] = count;
}

void launch_scan(const float* x, float* scan, float* seg_total, float* suffix, int* positives, int n, int width) {
  scan_kernel<<<n / 256, 256, 0, c10::musa::getCurrentMUSAStream()>>>(x, scan, seg_total, suffix, positives, width);
  C10_MUSA_KERNEL_LAUNCH_CHECK();
}
