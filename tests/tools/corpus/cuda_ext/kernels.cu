// A CUDA extension kernel as found in the wild: bias + ReLU over the last dimension,
// launched on the current CUDA stream.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out,
                                 int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
    const float v = x[i] + bias[i % cols];
    out[i] = v > 0.f ? v : 0.f;
  }
}

at::Tensor bias_relu_cuda(const at::Tensor& x, const at::Tensor& bias) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "bias_relu: expected CUDA tensors");
  TORCH_CHECK(x.is_contiguous() && x.size(-1) == bias.numel(), "bias_relu: bias must match the last dimension");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = at::empty_like(x);
  const int64_t n = x.numel();
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  bias_relu_kernel<<<blocks, threads, 0, stream>>>(x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(),
                                                   n, bias.numel());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
