#include "memory/allocator_config.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace torch_musa::allocator {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kLargeBuffer = 20 * kMiB;

std::mutex g_mu;

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

constexpr const char* kMusaVariable = "PYTORCH_MUSA_ALLOC_CONF";
// torch's device-generic variable (torch >= 2.9): musa reads it where its own is not set.
constexpr const char* kGenericVariable = "PYTORCH_ALLOC_CONF";

// A settings string and the variable it came from (named in errors).
struct Conf {
  const std::string& text;
  const char* variable;
};

[[noreturn]] void bad(const Conf& conf, const std::string& what) {
  TORCH_CHECK(false, conf.variable, "='", conf.text, "': ", what, ". Accepted keys: ", accepted_allocator_keys(),
              " (format key:value[,key:value...], e.g. expandable_segments:True,max_split_size_mb:256)");
}

double parse_number(const Conf& conf, const std::string& key, const std::string& v) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end == v.c_str() || *end != '\0') bad(conf, "value '" + v + "' of " + key + " is not a number");
  return d;
}

size_t parse_count(const Conf& conf, const std::string& key, const std::string& v) {
  for (char c : v)
    if (!std::isdigit(static_cast<unsigned char>(c))) bad(conf, "value '" + v + "' of " + key + " is not a non-negative integer");
  if (v.empty() || v.size() > 12) bad(conf, "value '" + v + "' of " + key + " is not a non-negative integer");
  return static_cast<size_t>(std::stoull(v));
}

bool is_pow2(size_t v) { return v && !(v & (v - 1)); }

size_t bucket_of_mib(size_t mib) {
  size_t i = 0;
  while ((size_t(1) << (i + 1)) <= mib && i + 1 < kRoundUpPowerOfTwoIntervals) ++i;
  return i;
}

void parse_divisions(const Conf& conf, const std::string& v, AllocatorConfig& c) {
  const std::string key = "roundup_power2_divisions";
  auto check_div = [&](size_t d) {
    if (d != 0 && !is_pow2(d)) bad(conf, key + " values must be powers of two (or 0 to disable), got " + std::to_string(d));
    return d;
  };
  if (v.empty() || v.front() != '[') {
    c.roundup_power2_divisions.fill(check_div(parse_count(conf, key, v)));
    return;
  }
  if (v.back() != ']') bad(conf, key + " list must look like [256:1,512:2,>:4]");
  std::string body = v.substr(1, v.size() - 2);
  std::array<size_t, kRoundUpPowerOfTwoIntervals> out{};
  bool set[kRoundUpPowerOfTwoIntervals] = {};
  size_t last = 0;
  bool any = false;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    if (comma == std::string::npos) comma = body.size();
    std::string item = trim(body.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) bad(conf, key + " list has an empty entry");
    size_t colon = item.find(':');
    if (colon == std::string::npos) bad(conf, key + " list entry '" + item + "' is not <MiB>:<divisions>");
    std::string k = trim(item.substr(0, colon));
    size_t d = check_div(parse_count(conf, key, trim(item.substr(colon + 1))));
    if (k == ">") {
      for (size_t i = any ? last + 1 : 0; i < kRoundUpPowerOfTwoIntervals; ++i) out[i] = d, set[i] = true;
      last = kRoundUpPowerOfTwoIntervals - 1;
    } else {
      size_t mib = parse_count(conf, key, k);
      if (!is_pow2(mib)) bad(conf, key + " sizes must be powers of two in MiB, got " + k);
      size_t b = bucket_of_mib(mib);
      if (any && b <= last) bad(conf, key + " sizes must be increasing");
      // the bucket for this size, and any skipped smaller buckets, take d
      for (size_t i = any ? last + 1 : 0; i <= b; ++i) out[i] = d, set[i] = true;
      last = b;
    }
    any = true;
    if (comma == body.size()) break;
  }
  (void)set;
  c.roundup_power2_divisions = out;
}

// Keys musa does not use are refused in musa's own variable. In torch's generic one they are
// skipped: another allocator reads them (CUDA's, the host's), and torch checks its own keys.
void apply(const Conf& conf, AllocatorConfig& c, bool skip_foreign_keys = false) {
  size_t pos = 0;
  const std::string& s = conf.text;
  std::string applied;  // the items taken, as this config's source
  while (pos < s.size()) {
    // split on commas not inside [...]
    size_t end = pos;
    int depth = 0;
    while (end < s.size() && !(s[end] == ',' && depth == 0)) {
      if (s[end] == '[') ++depth;
      if (s[end] == ']') --depth;
      ++end;
    }
    std::string item = trim(s.substr(pos, end - pos));
    pos = end + 1;
    if (item.empty()) continue;
    size_t colon = item.find(':');
    if (colon == std::string::npos) bad(conf, "'" + item + "' is not key:value");
    std::string key = trim(item.substr(0, colon));
    std::string val = trim(item.substr(colon + 1));
    if (key == "expandable_segments") {
      if (val == "True" || val == "true" || val == "1") c.expandable_segments = true;
      else if (val == "False" || val == "false" || val == "0") c.expandable_segments = false;
      else bad(conf, "expandable_segments must be True or False, got '" + val + "'");
    } else if (key == "max_split_size_mb") {
      size_t mb = parse_count(conf, key, val);
      if (mb * kMiB <= kLargeBuffer) bad(conf, "max_split_size_mb must be > 20 (MiB), got " + val);
      c.max_split_size = mb * kMiB;
    } else if (key == "max_non_split_rounding_mb") {
      size_t mb = parse_count(conf, key, val);
      if (mb * kMiB <= kLargeBuffer) bad(conf, "max_non_split_rounding_mb must be > 20 (MiB), got " + val);
      c.max_non_split_rounding = mb * kMiB;
    } else if (key == "garbage_collection_threshold") {
      double t = parse_number(conf, key, val);
      if (!(t > 0.0 && t < 1.0)) bad(conf, "garbage_collection_threshold must be between 0.0 and 1.0 (exclusive), got " + val);
      c.garbage_collection_threshold = t;
    } else if (key == "cpu") {
      if (val == "unified") c.cpu_unified = true;
      else if (val == "native") c.cpu_unified = false;
      else bad(conf, "cpu must be unified (CPU tensors in host memory the device addresses) or native, got '" + val + "'");
    } else if (key == "roundup_power2_divisions") {
      parse_divisions(conf, val, c);
    } else if (skip_foreign_keys) {
      continue;
    } else {
      bad(conf, "unknown key '" + key + "'");
    }
    applied += (applied.empty() ? "" : ",") + item;
  }
  c.source = applied;
}

}  // namespace

const char* accepted_allocator_keys() {
  return "expandable_segments, max_split_size_mb, max_non_split_rounding_mb, garbage_collection_threshold, "
         "roundup_power2_divisions, cpu";
}

size_t AllocatorConfig::divisions_for(size_t size) const {
  size_t mib = size / kMiB;
  size_t b = mib == 0 ? 0 : bucket_of_mib(mib);
  return roundup_power2_divisions[b];
}

AllocatorConfig parse_allocator_config(const std::string& conf) {
  AllocatorConfig c;
  apply({conf, kMusaVariable}, c);
  return c;
}

EnvConf env_allocator_conf() {
  if (const char* own = std::getenv(kMusaVariable)) return {own, kMusaVariable};
  if (const char* generic = std::getenv(kGenericVariable)) return {generic, kGenericVariable};
  return {nullptr, nullptr};
}

namespace detail {
std::atomic<AllocatorConfig*> g_config{nullptr};  // written under g_mu; never freed

const AllocatorConfig& load_allocator_config() {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_config.load()) {
    AllocatorConfig c;  // a bad value throws; retried next time
    if (EnvConf env = env_allocator_conf(); env.text != nullptr)
      // torch's generic variable also holds other allocators' keys
      apply({env.text, env.variable}, c, /*skip_foreign_keys=*/env.variable == kGenericVariable);
    g_config.store(new AllocatorConfig(c), std::memory_order_release);
  }
  return *g_config.load();
}
}  // namespace detail

using detail::g_config;

void set_allocator_settings(const std::string& conf) {
  AllocatorConfig next = allocator_config();
  apply({conf, kMusaVariable}, next);
  std::lock_guard<std::mutex> g(g_mu);
  // The old object may still be read by an allocator that copied its
  // reference; keep it alive (settings change a handful of times per run).
  g_config.store(new AllocatorConfig(next), std::memory_order_release);
}

void replace_allocator_settings(const std::string& conf) {
  AllocatorConfig next = parse_allocator_config(conf);
  (void)allocator_config();
  std::lock_guard<std::mutex> g(g_mu);
  g_config.store(new AllocatorConfig(next), std::memory_order_release);
}

}  // namespace torch_musa::allocator
