// The device side of a .mu source compiled for the host driver: CUDA's keywords,
// built-in variables, barriers, warp operations, atomics and math, over the SIMT
// engine. musa_extension puts `#include <musa_simt/device.h>` at the top of every
// rewritten .mu file (kernel launches become musa_simt::launch calls there).
#pragma once

#define __MUSACC__ 1
#define __MUSA_SIMT__ 1  // device code runs in the host SIMT emulation

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "atomics.h"
#include "engine.h"
#include "launch.h"
#include "device_math.h"
#include "vector_types.h"

// Everything here is private to each extension (no symbol is shared between two
// extensions, which may come from different torch_musa versions).
#pragma GCC visibility push(hidden)

// Execution-space and memory-space keywords: one host compilation serves both sides.
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) alignas(n)
// Static shared memory: one copy per OS thread, which runs one block at a time. The
// source rewriter already turns `__shared__` into this (and `extern __shared__` arrays
// into the block's dynamic buffer); the macro covers included headers.
#define __shared__ static thread_local

// Built-in variables, read from the running fiber and its block.
#define threadIdx (::musa_simt::t_lane->tid)
#define blockIdx (::musa_simt::t_worker->block_idx)
#define blockDim (::musa_simt::t_worker->grid->cfg.block)
#define gridDim (::musa_simt::t_worker->grid->cfg.grid)
constexpr int warpSize = 32;

namespace musa_simt {
inline void* dynamic_shared() { return t_worker->dyn_shared; }

inline uint64_t block_op(BlockOp op, bool pred) {
  Lane* l = t_lane;
  l->bop = op;
  l->value = pred;
  t_worker->wait(State::AtBlock);
  return t_lane->result;
}

template <typename T>
inline T warp_op(WarpOp op, unsigned mask, T v, int arg, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                "warp shuffles move values of at most 8 bytes");
  Lane* l = t_lane;
  l->wop = op;
  l->mask = mask;
  l->arg = arg;
  l->width = width;
  l->value = 0;
  std::memcpy(&l->value, &v, sizeof(T));
  t_worker->wait(State::AtWarp);
  T r;
  std::memcpy(&r, &t_lane->result, sizeof(T));
  return r;
}
}  // namespace musa_simt

// ---- barriers and fences ----
inline void __syncthreads() { ::musa_simt::block_op(::musa_simt::BlockOp::Sync, false); }
inline int __syncthreads_count(int pred) {
  return static_cast<int>(::musa_simt::block_op(::musa_simt::BlockOp::Count, pred != 0));
}
inline int __syncthreads_and(int pred) {
  return static_cast<int>(::musa_simt::block_op(::musa_simt::BlockOp::And, pred != 0));
}
inline int __syncthreads_or(int pred) {
  return static_cast<int>(::musa_simt::block_op(::musa_simt::BlockOp::Or, pred != 0));
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::musa_simt::warp_op<int>(::musa_simt::WarpOp::Sync, mask, 0, 0, 32);
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ---- warp shuffles and votes ----
template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::musa_simt::warp_op(::musa_simt::WarpOp::Idx, mask, v, src, width);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::musa_simt::warp_op(::musa_simt::WarpOp::Up, mask, v, static_cast<int>(delta), width);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::musa_simt::warp_op(::musa_simt::WarpOp::Down, mask, v, static_cast<int>(delta), width);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::musa_simt::warp_op(::musa_simt::WarpOp::Xor, mask, v, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return static_cast<unsigned>(::musa_simt::warp_op<uint64_t>(::musa_simt::WarpOp::Ballot, mask, pred != 0, 0, 32));
}
inline int __any_sync(unsigned mask, int pred) {
  return static_cast<int>(::musa_simt::warp_op<uint64_t>(::musa_simt::WarpOp::Any, mask, pred != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int pred) {
  return static_cast<int>(::musa_simt::warp_op<uint64_t>(::musa_simt::WarpOp::All, mask, pred != 0, 0, 32));
}
// The lanes of the calling warp that have not exited.
inline unsigned __activemask() {
  const unsigned first = ::musa_simt::t_lane->index / 32 * 32;
  const dim3 b = blockDim;
  const unsigned n = b.x * b.y * b.z;
  return n - first >= 32 ? 0xffffffffu : (1u << (n - first)) - 1u;
}

// ---- timers ----
inline long long clock64() {
#if defined(__x86_64__)
  return static_cast<long long>(__builtin_ia32_rdtsc());
#else
  return static_cast<long long>(__builtin_readcyclecounter());
#endif
}

#pragma GCC visibility pop
