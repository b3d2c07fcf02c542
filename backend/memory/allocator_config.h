// PYTORCH_MUSA_ALLOC_CONF: the musa caching allocator's settings, in the
// format of PYTORCH_CUDA_ALLOC_CONF ("key:value,key:value").
//
//   expandable_segments:True|False     map device pages on demand into one
//                                      virtual range per stream and pool
//   max_split_size_mb:<MiB>            blocks larger than this are never split
//   max_non_split_rounding_mb:<MiB>    an unsplit (oversize) block serves requests up to
//                                      this much smaller than itself (default 20)
//   garbage_collection_threshold:<f>   0 < f < 1: above this fraction of the
//                                      allowed memory, free old cached blocks
//   roundup_power2_divisions:<n>|[<MiB>:<n>,...,>:<n>]
//                                      round sizes up to 1/n steps between
//                                      powers of two
//   cpu:unified|native                 unified: CPU tensors are allocated in host memory
//                                      the devices address in place (unified_allocator.h)
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <string>

namespace torch_musa::allocator {

constexpr size_t kRoundUpPowerOfTwoIntervals = 16;  // buckets 1 MiB, 2 MiB, ... 32 GiB+

struct AllocatorConfig {
  bool expandable_segments = false;
  size_t max_split_size = static_cast<size_t>(-1);  // no limit
  size_t max_non_split_rounding = size_t(20) << 20;  // torch.cuda's default: its large-segment size
  double garbage_collection_threshold = 0.0;        // 0: off
  std::array<size_t, kRoundUpPowerOfTwoIntervals> roundup_power2_divisions{};  // 0: off
  bool cpu_unified = false;  // cpu:unified
  std::string source;  // the string this was parsed from

  // Divisions for a (rounded-to-512) size; 0 or 1 means plain 512-byte rounding.
  size_t divisions_for(size_t size) const;
};

// Parses a PYTORCH_MUSA_ALLOC_CONF string. Throws c10::Error naming the
// accepted keys on an unknown key or a bad value.
AllocatorConfig parse_allocator_config(const std::string& conf);

// The settings text the environment gives, and its variable: PYTORCH_MUSA_ALLOC_CONF, else
// torch's generic PYTORCH_ALLOC_CONF (as CUDA reads it). text is nullptr when neither is set.
struct EnvConf {
  const char* text;
  const char* variable;
};
EnvConf env_allocator_conf();

namespace detail {
extern std::atomic<AllocatorConfig*> g_config;   // the settings in force, once read
const AllocatorConfig& load_allocator_config();  // reads the environment's (first use)
}  // namespace detail

// The settings in force (the environment's, env_allocator_conf, on first use). Inline: every
// allocation and free reads them.
inline const AllocatorConfig& allocator_config() {
  if (AllocatorConfig* c = detail::g_config.load(std::memory_order_acquire)) return *c;
  return detail::load_allocator_config();
}
// Applies `conf` on top of the current settings (keys not named keep their
// value), like torch.cuda.memory._set_allocator_settings.
void set_allocator_settings(const std::string& conf);
// Replaces all settings with those of `conf` (unnamed keys take defaults).
void replace_allocator_settings(const std::string& conf);
// The accepted keys, comma-separated (for error messages and docs).
const char* accepted_allocator_keys();

}  // namespace torch_musa::allocator
