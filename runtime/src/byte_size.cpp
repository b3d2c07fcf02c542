// Byte sizes as environment variables give them: "16GiB", "512 MiB", "2m", a byte count.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "driver.h"

namespace musa_rt {

bool parseByteSize(const std::string& text, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v >= 0) || std::isinf(v)) return false;
  std::string unit(end);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else return false;
  // Out-of-range float-to-integer conversion is undefined; refuse it.
  if (v * mult >= 18446744073709551616.0) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

}  // namespace musa_rt
