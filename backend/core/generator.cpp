#include "core/generator.h"

#include <c10/util/CallOnce.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <mutex>
#include <random>

#include "core/device.h"

namespace torch_musa {

MusaGeneratorImpl::MusaGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void MusaGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
uint64_t MusaGeneratorImpl::current_seed() const { return seed_; }
uint64_t MusaGeneratorImpl::seed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  set_current_seed(s);
  return s;
}
void MusaGeneratorImpl::set_offset(uint64_t offset) { offset_ = offset; }
uint64_t MusaGeneratorImpl::get_offset() const { return offset_; }

uint64_t MusaGeneratorImpl::advance(uint64_t n) {
  uint64_t o = offset_;
  offset_ += n;
  return o;
}

// State layout matches CUDA's generator: 8 bytes seed, 8 bytes offset.
c10::intrusive_ptr<c10::TensorImpl> MusaGeneratorImpl::get_state() const {
  auto state = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  auto* p = state.data_ptr<uint8_t>();
  std::memcpy(p, &seed_, 8);
  std::memcpy(p + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

void MusaGeneratorImpl::set_state(const c10::TensorImpl& state) {
  TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == 16 &&
                  state.device().is_cpu(),
              "a musa RNG state must be a CPU ByteTensor of 16 bytes (seed, offset), as returned by "
              "torch.musa.get_rng_state(); got ", state.numel(), " elements of ", state.dtype());
  auto* p = static_cast<const uint8_t*>(state.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

MusaGeneratorImpl* MusaGeneratorImpl::clone_impl() const {
  auto* g = new MusaGeneratorImpl(device().index(), seed_);
  g->offset_ = offset_;
  return g;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static c10::once_flag once;  // asked by every random op (see core/stream.cpp's pools)
  static std::vector<at::Generator> gens;
  c10::call_once(once, [] {
    auto n = device_count();
    for (c10::DeviceIndex i = 0; i < n; ++i) gens.push_back(at::make_generator<MusaGeneratorImpl>(i));
  });
  if (device < 0) device = current_device();
  check_device_index(device);
  return gens[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return at::make_generator<MusaGeneratorImpl>(device);
}

uint64_t claim_kernel_seed(const at::Generator& musa_gen) {
  at::Generator gen = musa_gen;  // shares the impl; mutex() needs non-const
  uint64_t seed, offset;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    auto* g = gen.get<MusaGeneratorImpl>();
    seed = g->current_seed();
    offset = g->advance();
  }
  return philox_mix(seed, offset);
}

at::Generator cpu_generator_from(const at::Generator& musa_gen) {
  return at::make_generator<at::CPUGeneratorImpl>(claim_kernel_seed(musa_gen));
}

uint64_t philox_mix(uint64_t seed, uint64_t offset) {
  // splitmix64 over seed and offset: cheap and well-distributed.
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (offset + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace torch_musa
