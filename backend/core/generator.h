// Per-device musa random generators: Philox-style (seed, offset) counters.
// Random ops are delegated to kernel-device generators derived from the
// counter, so results depend only on torch.musa.manual_seed and the number of
// random ops drawn since, never on the CPU generator.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace torch_musa {

struct MusaGeneratorImpl : public c10::GeneratorImpl {
  explicit MusaGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);
  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  // Reserves `n` counter increments and returns the first offset reserved.
  uint64_t advance(uint64_t n = 1);

 private:
  MusaGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

// Advances the musa generator's counter by one op and returns the seed that
// op's kernel-device generator starts from.
uint64_t claim_kernel_seed(const at::Generator& musa_gen);

// A CPU generator seeded from the musa generator's counter (advancing it).
at::Generator cpu_generator_from(const at::Generator& musa_gen);

// Mixes a (seed, offset) pair into a 64-bit seed for a kernel-device generator.
uint64_t philox_mix(uint64_t seed, uint64_t offset);

}  // namespace torch_musa
