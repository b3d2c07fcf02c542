// RoPE's CUDA kernels (cuda driver), the index form of rope.cpp: forward
//   y[j] = u[j] cos(f[j]) + sign(j) u[q(j)] sin(f[j]),  u[j] = x[p(j)]   (j < R; the rest pass through)
// and its transpose backward, dx[p(j)] = g[j] cos(f[j]) - sign(j) g[q(j)] sin(f[q(j)]).
// One block per row; the row is read once into shared memory (each output reads two inputs).
// The angles' cos/sin are CUDA's accurate cosf/sinf, which reduce any angle's range (long
// sequences reach thousands of radians). Compiled ahead of time, launched from C++.
#include "fused_llm/rope_kernels.h"

#include "fused_llm/device_math.cuh"

namespace torch_musa::fused_llm::rope_kernels {
namespace {

using namespace device;

struct Maps {
  int64_t R, h;
  bool interleaved, mla;
  __device__ int64_t p(int64_t j) const { return mla ? (j < h ? 2 * j : 2 * (j - h) + 1) : j; }
  __device__ int64_t q(int64_t j) const { return interleaved ? (j ^ 1) : (j < h ? j + h : j - h); }
  __device__ float sign(int64_t j) const { return (interleaved ? j % 2 == 0 : j < h) ? -1.f : 1.f; }
};

template <typename T>
__global__ void rope_kernel(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ freq, int64_t D,
                            int64_t S, int64_t inner, Maps m, bool backward) {
  extern __shared__ float row_in[];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * D;
  T* yr = y + row * D;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) row_in[j] = load(xr + j);
  __syncthreads();
  const float* f = freq + ((row / inner) % S) * m.R;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    if (j >= m.R) {
      store(yr + j, row_in[j]);
    } else if (!backward) {
      float s, c;
      sincosf(f[j], &s, &c);
      store(yr + j, row_in[m.p(j)] * c + m.sign(j) * row_in[m.p(m.q(j))] * s);
    } else {
      const int64_t q = m.q(j);
      store(yr + m.p(j), row_in[j] * cosf(f[j]) - m.sign(j) * row_in[q] * sinf(f[q]));
    }
  }
}

}  // namespace

cudaError_t rope(const Rope& a, cudaStream_t stream) {
  if (a.rows == 0 || a.D == 0) return cudaSuccess;
  const Maps maps{a.R, a.R / 2, a.interleaved, a.mla};
  const int threads = a.D <= 64 ? 64 : a.D <= 128 ? 128 : 256;
  const size_t shared = static_cast<size_t>(a.D) * sizeof(float);
  if (shared > 48 * 1024) return cudaErrorInvalidValue;  // (the caller checks D first)
  with_type(a.dt, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    rope_kernel<T><<<a.rows, threads, shared, stream>>>(static_cast<const T*>(a.x), static_cast<T*>(a.y), a.freq,
                                                        a.D, a.S, a.inner, maps, a.backward);
  });
  return cudaGetLastError();
}

}  // namespace torch_musa::fused_llm::rope_kernels
