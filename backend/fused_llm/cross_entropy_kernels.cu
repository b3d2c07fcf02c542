// Fused 2-D cross entropy's CUDA kernels (cuda driver), the math of cross_entropy.cpp:
//   forward: one block per row, an online max / sum-exp over the row (lse), the row's loss;
//   reduce:  one block sums the rows' losses and the mean's denominator in a fixed order
//            (deterministic, as CUDA's nll_loss);
//   backward: a (row, column chunk) grid, dx = exp(x - lse) * scale - [col == t] * scale.
// Compiled ahead of time (not Triton): an eager F.cross_entropy is host-bound, and a JIT
// kernel's launch costs a Triton front end on its first call and tens of microseconds each.
// Only CUDA headers here; cross_entropy_cuda.cpp checks the arguments and allocates.
#include "fused_llm/cross_entropy_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace torch_musa::fused_llm::ce_kernels {
namespace {

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__device__ __forceinline__ float load_as(const void* p, int64_t i, Dtype dt) {
  switch (dt) {
    case Dtype::kDouble: return static_cast<float>(static_cast<const double*>(p)[i]);
    case Dtype::kHalf: return load(static_cast<const __half*>(p) + i);
    case Dtype::kBFloat16: return load(static_cast<const __nv_bfloat16*>(p) + i);
    default: return load(static_cast<const float*>(p) + i);
  }
}

__device__ __forceinline__ void store_as(void* p, int64_t i, Dtype dt, float v) {
  switch (dt) {
    case Dtype::kDouble: static_cast<double*>(p)[i] = v; break;
    case Dtype::kHalf: store(static_cast<__half*>(p) + i, v); break;
    case Dtype::kBFloat16: store(static_cast<__nv_bfloat16*>(p) + i, v); break;
    default: store(static_cast<float*>(p) + i, v);
  }
}

// 16 bytes of T: one vector load or store.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

// A running (max, sum of exp(x - max)); -inf max means no finite element yet.
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ void add(MaxSum& a, float x) {
  if (x > a.m) {
    a.s = a.s * __expf(a.m - x) + 1.f;
    a.m = x;
  } else if (a.m != -INFINITY) {
    a.s += __expf(x - a.m);  // (a NaN x falls here and makes the sum NaN, as torch's)
  }
}

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  if (a.m == -INFINITY) return b;
  if (b.m == -INFINITY) return a;
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ float shfl_down(float v, int d) { return __shfl_down_sync(0xffffffffu, v, d); }
__device__ __forceinline__ MaxSum shfl_down(MaxSum v, int d) { return {shfl_down(v.m, d), shfl_down(v.s, d)}; }

struct Combine {
  __device__ MaxSum operator()(MaxSum a, MaxSum b) const { return combine(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Block-wide reductions in a fixed order: lanes by shuffles, then warp 0 over the warps' results.
template <typename V, typename Op>
__device__ V block_reduce(V v, Op op, V* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  for (int d = 16; d > 0; d /= 2) v = op(v, shfl_down(v, d));
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = shared[lane < warps ? lane : 0];
    for (int d = 16; d > 0; d /= 2) {
      const V o = shfl_down(v, d);
      if (lane + d < warps) v = op(v, o);
    }
  }
  return v;  // valid in thread 0
}

template <typename T, bool kVector>
__global__ void forward_kernel(const T* __restrict__ x, int64_t C, const int64_t* __restrict__ t,
                               const float* __restrict__ w, int64_t ignore_index, void* rows, Dtype rows_dt,
                               float* __restrict__ lse_out) {
  __shared__ MaxSum shared[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * C;
  MaxSum acc{-INFINITY, 0.f};
  if constexpr (kVector) {  // C * sizeof(T) is a multiple of 16 and the rows are 16-byte aligned
    const auto* packs = reinterpret_cast<const Pack<T>*>(xr);
    for (int64_t i = threadIdx.x; i < C / Pack<T>::kN; i += blockDim.x) {
      const Pack<T> p = packs[i];
#pragma unroll
      for (int k = 0; k < Pack<T>::kN; ++k) add(acc, load(&p.v[k]));
    }
  } else {
    for (int64_t i = threadIdx.x; i < C; i += blockDim.x) add(acc, load(xr + i));
  }
  acc = block_reduce(acc, Combine{}, shared);
  if (threadIdx.x != 0) return;
  const float lse = acc.m == -INFINITY ? -INFINITY : acc.m + logf(acc.s);
  const int64_t c = t[row];
  const bool in_range = c >= 0 && c < C;
  float loss = lse - (in_range ? load(xr + c) : 0.f);
  if (w != nullptr && in_range) loss *= w[c];
  if (!in_range) loss = NAN;  // an out-of-range target: NaN, not a wild read
  if (c == ignore_index) loss = 0.f;
  store_as(rows, row, rows_dt, loss);
  lse_out[row] = lse;
}

__global__ void reduce_kernel(const float* __restrict__ rows, const int64_t* __restrict__ t,
                              const float* __restrict__ w, int64_t M, int64_t C, int64_t ignore_index,
                              int reduction, void* loss, Dtype loss_dt, float* __restrict__ denom) {
  __shared__ float shared[32];
  float total = 0.f, count = 0.f;
  for (int64_t r = threadIdx.x; r < M; r += blockDim.x) {
    const int64_t c = t[r];
    const bool counted = c != ignore_index;
    if (w != nullptr) {
      count += (counted && c >= 0 && c < C) ? w[c] : 0.f;
    } else {
      count += counted ? 1.f : 0.f;
    }
    if (rows != nullptr) total += rows[r];
  }
  count = block_reduce(count, Sum{}, shared);
  __syncthreads();  // (shared is reused)
  total = block_reduce(total, Sum{}, shared);
  if (threadIdx.x != 0) return;
  *denom = count;
  if (reduction != 0) store_as(loss, 0, loss_dt, reduction == 1 ? total / count : total);
}

template <typename T, bool kVector>
__global__ void backward_kernel(const void* g, Dtype g_dt, int64_t g_stride, const float* __restrict__ denom,
                                bool mean, const T* __restrict__ x, const int64_t* __restrict__ t,
                                const float* __restrict__ w, const float* __restrict__ lse, T* __restrict__ dx,
                                int64_t C, int64_t ignore_index) {
  const int64_t row = blockIdx.x;
  const int64_t c = t[row];
  const bool counted = c >= 0 && c < C && c != ignore_index;
  float scale = load_as(g, row * g_stride, g_dt);
  if (mean) scale /= *denom;
  if (w != nullptr) scale *= counted ? w[c] : 0.f;
  if (!counted) scale = 0.f;
  const float l = lse[row];
  const T* xr = x + row * C;
  T* dr = dx + row * C;
  if constexpr (kVector) {
    constexpr int kN = Pack<T>::kN;
    const int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    if (i >= C / kN) return;
    const Pack<T> p = reinterpret_cast<const Pack<T>*>(xr)[i];
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const int64_t col = i * kN + k;
      store(&out.v[k], __expf(load(&p.v[k]) - l) * scale - (col == c ? scale : 0.f));
    }
    reinterpret_cast<Pack<T>*>(dr)[i] = out;
  } else {
    const int64_t col = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    if (col >= C) return;
    store(dr + col, __expf(load(xr + col) - l) * scale - (col == c ? scale : 0.f));
  }
}

// Calls fn with a null pointer of the element type dt names.
template <typename Fn>
void with_type(Dtype dt, Fn&& fn) {
  switch (dt) {
    case Dtype::kHalf: fn(static_cast<__half*>(nullptr)); break;
    case Dtype::kBFloat16: fn(static_cast<__nv_bfloat16*>(nullptr)); break;
    default: fn(static_cast<float*>(nullptr));
  }
}

bool vectorizable(const void* p, int64_t C, int elem_size) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (C * elem_size) % 16 == 0;
}

int row_threads(int64_t C) { return C <= 1024 ? 128 : C <= 8192 ? 256 : 512; }

constexpr int kChunkThreads = 256;

}  // namespace

cudaError_t forward(const Forward& a, cudaStream_t stream) {
  if (a.M > 0) {
    with_type(a.x_dt, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* x = static_cast<const T*>(a.x);
      const int threads = row_threads(a.C);
      if (vectorizable(a.x, a.C, sizeof(T))) {
        forward_kernel<T, true><<<a.M, threads, 0, stream>>>(x, a.C, a.t, a.w, a.ignore_index, a.rows, a.rows_dt,
                                                             a.lse);
      } else {
        forward_kernel<T, false><<<a.M, threads, 0, stream>>>(x, a.C, a.t, a.w, a.ignore_index, a.rows, a.rows_dt,
                                                              a.lse);
      }
    });
  }
  reduce_kernel<<<1, 1024, 0, stream>>>(a.reduction == 0 ? nullptr : static_cast<const float*>(a.rows), a.t, a.w,
                                        a.M, a.C, a.ignore_index, static_cast<int>(a.reduction), a.loss, a.loss_dt,
                                        a.denom);
  return cudaGetLastError();
}

cudaError_t backward(const Backward& a, cudaStream_t stream) {
  if (a.M == 0 || a.C == 0) return cudaSuccess;
  with_type(a.x_dt, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* x = static_cast<const T*>(a.x);
    T* dx = static_cast<T*>(a.dx);
    if (vectorizable(a.x, a.C, sizeof(T)) && vectorizable(a.dx, a.C, sizeof(T))) {
      const int64_t packs = a.C / Pack<T>::kN;
      const dim3 grid(a.M, (packs + kChunkThreads - 1) / kChunkThreads);
      backward_kernel<T, true><<<grid, kChunkThreads, 0, stream>>>(a.g, a.g_dt, a.g_stride, a.denom, a.mean, x, a.t,
                                                                  a.w, a.lse, dx, a.C, a.ignore_index);
    } else {
      const dim3 grid(a.M, (a.C + kChunkThreads - 1) / kChunkThreads);
      backward_kernel<T, false><<<grid, kChunkThreads, 0, stream>>>(a.g, a.g_dt, a.g_stride, a.denom, a.mean, x, a.t,
                                                                   a.w, a.lse, dx, a.C, a.ignore_index);
    }
  });
  return cudaGetLastError();
}

}  // namespace torch_musa::fused_llm::ce_kernels
