// CUDA's device math for host-compiled device code: <cmath> has the standard names
// (expf, sqrtf, ...); these are the intrinsics and CUDA-only functions on top of it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

// Everything here is private to each extension (no symbol is shared between two
// extensions, which may come from different torch_musa versions).
#pragma GCC visibility push(hidden)

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / std::cbrt(x); }
inline float exp10f(float x) { return std::pow(10.0f, x); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __log10f(float x) { return std::log10(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / std::sqrt(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }
inline double __dadd_rn(double x, double y) { return x + y; }
inline double __dmul_rn(double x, double y) { return x * y; }
inline double __fma_rn(double x, double y, double z) { return std::fma(x, y, z); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752); }
inline float sinpif(float x) { return std::sin(3.14159265358979323846f * x); }
inline float cospif(float x) { return std::cos(3.14159265358979323846f * x); }

// CUDA's global min/max overloads (integers and floating point).
#define MUSA_SIMT_MINMAX(T)                          \
  inline T min(T a, T b) { return b < a ? b : a; } \
  inline T max(T a, T b) { return a < b ? b : a; }
MUSA_SIMT_MINMAX(int)
MUSA_SIMT_MINMAX(unsigned int)
MUSA_SIMT_MINMAX(long)
MUSA_SIMT_MINMAX(unsigned long)
MUSA_SIMT_MINMAX(long long)
MUSA_SIMT_MINMAX(unsigned long long)
#undef MUSA_SIMT_MINMAX
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// ---- bit casts and conversions ----
namespace musa_simt {
template <typename To, typename From>
inline To bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast of different sizes");
  To r;
  std::memcpy(&r, &v, sizeof(To));
  return r;
}
}  // namespace musa_simt
inline int __float_as_int(float x) { return musa_simt::bit_cast<int>(x); }
inline unsigned __float_as_uint(float x) { return musa_simt::bit_cast<unsigned>(x); }
inline float __int_as_float(int x) { return musa_simt::bit_cast<float>(x); }
inline float __uint_as_float(unsigned x) { return musa_simt::bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return musa_simt::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return musa_simt::bit_cast<double>(x); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(std::nearbyint(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline long long __float2ll_rn(float x) { return static_cast<long long>(std::nearbyint(x)); }
inline float __double2float_rn(double x) { return static_cast<float>(x); }

// ---- integer intrinsics ----
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return __builtin_bswap32(x);
}
inline int __mul24(int x, int y) { return (x << 8 >> 8) * (y << 8 >> 8); }
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xFFFFFFu) * (y & 0xFFFFFFu); }
inline int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
inline unsigned __umulhi(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32);
}
inline unsigned __sad(int x, int y, unsigned z) { return z + static_cast<unsigned>(x > y ? x - y : y - x); }

// Read-only cache loads are ordinary loads here.
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

#pragma GCC visibility pop
