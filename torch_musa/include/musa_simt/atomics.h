// CUDA's atomic functions for host-compiled device code. Blocks run on several OS
// threads at once, so these are real (sequentially consistent) atomics; float and
// double arithmetic is a compare-and-swap loop.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

// Everything here is private to each extension (no symbol is shared between two
// extensions, which may come from different torch_musa versions).
#pragma GCC visibility push(hidden)

namespace musa_simt {
template <typename T, typename F>
inline T atomic_update(T* p, F f) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4- or 8-byte values");
  using Bits = typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type;
  Bits* bp = reinterpret_cast<Bits*>(p);
  Bits old_bits = __atomic_load_n(bp, __ATOMIC_RELAXED);
  for (;;) {
    T old_v;
    std::memcpy(&old_v, &old_bits, sizeof(T));
    T new_v = f(old_v);
    Bits new_bits;
    std::memcpy(&new_bits, &new_v, sizeof(T));
    if (__atomic_compare_exchange_n(bp, &old_bits, new_bits, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return old_v;
  }
}
}  // namespace musa_simt

// The overloads CUDA has, no more: code that builds here builds for the GPU too.
#define MUSA_SIMT_BIT_ATOMICS(T)                                                                             \
  inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }                       \
  inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }                     \
  inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }                       \
  inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }                         \
  inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }                       \
  inline T atomicCAS(T* p, T compare, T v) {                                                                 \
    __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                  \
    return compare;                                                                                          \
  }
#define MUSA_SIMT_MINMAX_ATOMICS(T)                                                                          \
  inline T atomicMin(T* p, T v) {                                                                            \
    return ::musa_simt::atomic_update(p, [v](T o) { return v < o ? v : o; });                                \
  }                                                                                                          \
  inline T atomicMax(T* p, T v) {                                                                            \
    return ::musa_simt::atomic_update(p, [v](T o) { return v > o ? v : o; });                                \
  }

MUSA_SIMT_BIT_ATOMICS(int)
MUSA_SIMT_BIT_ATOMICS(unsigned int)
MUSA_SIMT_BIT_ATOMICS(unsigned long long)
MUSA_SIMT_MINMAX_ATOMICS(int)
MUSA_SIMT_MINMAX_ATOMICS(unsigned int)
MUSA_SIMT_MINMAX_ATOMICS(long long)
MUSA_SIMT_MINMAX_ATOMICS(unsigned long long)
#undef MUSA_SIMT_BIT_ATOMICS
#undef MUSA_SIMT_MINMAX_ATOMICS

inline int atomicSub(int* p, int v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicSub(unsigned* p, unsigned v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
inline unsigned short atomicCAS(unsigned short* p, unsigned short compare, unsigned short v) {
  __atomic_compare_exchange_n(p, &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}
inline float atomicAdd(float* p, float v) { return ::musa_simt::atomic_update(p, [v](float o) { return o + v; }); }
inline double atomicAdd(double* p, double v) { return ::musa_simt::atomic_update(p, [v](double o) { return o + v; }); }
inline float atomicExch(float* p, float v) { return ::musa_simt::atomic_update(p, [v](float) { return v; }); }

// Wrapping increment/decrement (CUDA's semantics: ((old >= v) ? 0 : old + 1), ...).
inline unsigned atomicInc(unsigned* p, unsigned v) {
  return ::musa_simt::atomic_update(p, [v](unsigned o) { return o >= v ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* p, unsigned v) {
  return ::musa_simt::atomic_update(p, [v](unsigned o) { return (o == 0 || o > v) ? v : o - 1; });
}
// The _block/_system scopes are the same atomics here.
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd

#pragma GCC visibility pop
