// A C++ program that runs an AOTInductor package on musa, with no Python code:
//   aoti_package_main <package.pt2> <torch_musa _C library> <batch> <features>
// It loads torch_musa's native library (which registers the musa device, its
// allocator and ops at load time), runs the package through
// torch::inductor::AOTIModelPackageLoader on x = arange(batch * features) / 100
// moved to musa:0, and prints the device of each output and its values.
#include <ATen/ATen.h>
#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <package.pt2> <torch_musa _C library> <batch> <features>\n", argv[0]);
    return 2;
  }
  // RTLD_GLOBAL: the package's code and torch's dispatcher find musa's ops and hooks.
  if (dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "cannot load torch_musa: %s\n", dlerror());
    return 3;
  }
  c10::register_privateuse1_backend("musa");
  const int64_t batch = std::atoll(argv[3]), features = std::atoll(argv[4]);
  at::Tensor x = (at::arange(batch * features, at::kFloat) / 100).reshape({batch, features});
  x = x.to(c10::Device("musa:0"));

  torch::inductor::AOTIModelPackageLoader loader(argv[1]);
  std::vector<at::Tensor> outputs = loader.run({x});
  for (const at::Tensor& out : outputs) {
    std::printf("device %s\n", out.device().str().c_str());
    at::Tensor host = out.to(at::kCPU).to(at::kDouble).contiguous().reshape({-1});
    for (int64_t i = 0; i < host.numel(); ++i) std::printf("%.9g\n", host[i].item<double>());
  }
  return 0;
}
