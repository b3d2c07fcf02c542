// SwishGLU's CUDA kernels (cuda driver), the math of swish_glu.cpp over rows of 2n features
// (halves a, b):  y = silu(a) * b;  da = g * b * sig(a) * (1 + a * (1 - sig(a))),  db = g * silu(a).
// One thread per element of a half-row, or per 16-byte pack of one where n allows it (a pack
// then never crosses a row). Compiled ahead of time, launched from C++: a host-bound op.
#include "fused_llm/swish_glu_kernels.h"

#include "fused_llm/device_math.cuh"

namespace torch_musa::fused_llm::glu_kernels {
namespace {

using namespace device;

constexpr int kThreads = 256;

__device__ __forceinline__ float sigmoid(float a) { return 1.f / (1.f + __expf(-a)); }

template <typename T, int kN>
__global__ void forward_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t packs, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= packs) return;
  const int64_t first = i * kN, row = first / n, col = first % n;
  const T* a = x + row * 2 * n + col;
  const T* b = a + n;
  T* out = y + row * n + col;
  if constexpr (kN == 1) {
    const float av = load(a);
    store(out, av * sigmoid(av) * load(b));
  } else {
    const Pack<T> pa = *reinterpret_cast<const Pack<T>*>(a), pb = *reinterpret_cast<const Pack<T>*>(b);
    Pack<T> po;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const float av = load(&pa.v[k]);
      store(&po.v[k], av * sigmoid(av) * load(&pb.v[k]));
    }
    *reinterpret_cast<Pack<T>*>(out) = po;
  }
}

__device__ __forceinline__ void glu_grad(float g, float a, float b, float& da, float& db) {
  const float sg = sigmoid(a);
  da = g * b * sg * (1.f + a * (1.f - sg));
  db = g * a * sg;
}

template <typename T, int kN>
__global__ void backward_kernel(const T* __restrict__ g, const T* __restrict__ x, T* __restrict__ dx,
                                int64_t packs, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= packs) return;
  const int64_t first = i * kN, row = first / n, col = first % n;
  const T* a = x + row * 2 * n + col;
  const T* b = a + n;
  const T* gr = g + row * n + col;
  T* da_out = dx + row * 2 * n + col;
  T* db_out = da_out + n;
  if constexpr (kN == 1) {
    float da, db;
    glu_grad(load(gr), load(a), load(b), da, db);
    store(da_out, da);
    store(db_out, db);
  } else {
    const Pack<T> pa = *reinterpret_cast<const Pack<T>*>(a), pb = *reinterpret_cast<const Pack<T>*>(b);
    const Pack<T> pg = *reinterpret_cast<const Pack<T>*>(gr);
    Pack<T> pda, pdb;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      float da, db;
      glu_grad(load(&pg.v[k]), load(&pa.v[k]), load(&pb.v[k]), da, db);
      store(&pda.v[k], da);
      store(&pdb.v[k], db);
    }
    *reinterpret_cast<Pack<T>*>(da_out) = pda;
    *reinterpret_cast<Pack<T>*>(db_out) = pdb;
  }
}

// Launches kernel<T, pack or 1> over the rows * n elements.
template <typename Launch>
cudaError_t launch(KernelDtype dt, int64_t rows, int64_t n, bool aligned, Launch&& go) {
  with_type(dt, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kN = Pack<T>::kN;
    if (aligned && n % kN == 0) {
      go(tag, std::integral_constant<int, kN>{}, rows * n / kN);
    } else {
      go(tag, std::integral_constant<int, 1>{}, rows * n);
    }
  });
  return cudaGetLastError();
}

unsigned blocks(int64_t packs) { return static_cast<unsigned>((packs + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t forward(const void* x, void* y, KernelDtype dt, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  return launch(dt, rows, n, aligned16(x) && aligned16(y), [&](auto* tag, auto vec, int64_t packs) {
    using T = std::remove_pointer_t<decltype(tag)>;
    forward_kernel<T, decltype(vec)::value><<<blocks(packs), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), packs, n);
  });
}

cudaError_t backward(const void* g, const void* x, void* dx, KernelDtype dt, int64_t rows, int64_t n,
                     cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  return launch(dt, rows, n, aligned16(g) && aligned16(x) && aligned16(dx), [&](auto* tag, auto vec, int64_t packs) {
    using T = std::remove_pointer_t<decltype(tag)>;
    backward_kernel<T, decltype(vec)::value><<<blocks(packs), kThreads, 0, stream>>>(
        static_cast<const T*>(g), static_cast<const T*>(x), static_cast<T*>(dx), packs, n);
  });
}

}  // namespace torch_musa::fused_llm::glu_kernels
