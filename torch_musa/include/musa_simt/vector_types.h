// CUDA's built-in vector types and dim3 for host-compiled device code, with their alignments.
#pragma once

#include <cstdint>

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

#define MUSA_SIMT_VEC2(T, N, A)                                                     \
  struct alignas(A) N##2 { T x, y; };                                                \
  inline constexpr N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define MUSA_SIMT_VEC3(T, N)                                                        \
  struct N##3 { T x, y, z; };                                                        \
  inline constexpr N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define MUSA_SIMT_VEC4(T, N, A)                                                     \
  struct alignas(A) N##4 { T x, y, z, w; };                                          \
  inline constexpr N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
#define MUSA_SIMT_VECS(T, N, A2, A4) MUSA_SIMT_VEC2(T, N, A2) MUSA_SIMT_VEC3(T, N) MUSA_SIMT_VEC4(T, N, A4)

MUSA_SIMT_VECS(signed char, char, 2, 4)
MUSA_SIMT_VECS(unsigned char, uchar, 2, 4)
MUSA_SIMT_VECS(short, short, 4, 8)
MUSA_SIMT_VECS(unsigned short, ushort, 4, 8)
MUSA_SIMT_VECS(int, int, 8, 16)
MUSA_SIMT_VEC2(unsigned, uint, 8)
MUSA_SIMT_VEC4(unsigned, uint, 16)
MUSA_SIMT_VECS(float, float, 8, 16)
MUSA_SIMT_VECS(long long, longlong, 16, 16)
MUSA_SIMT_VECS(unsigned long long, ulonglong, 16, 16)
MUSA_SIMT_VECS(double, double, 16, 16)

inline constexpr uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }

#undef MUSA_SIMT_VEC2
#undef MUSA_SIMT_VEC3
#undef MUSA_SIMT_VEC4
#undef MUSA_SIMT_VECS
