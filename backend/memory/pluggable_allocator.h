// A MemPool's own segment allocator (torch.cuda.MemPool(allocator=...)): two functions from a
// shared library, as torch.cuda.memory.CUDAPluggableAllocator loads them,
//   void* alloc(ssize_t size, int device, void* stream);
//   void free(void* ptr, ssize_t size, int device, void* stream);
// where `stream` is the raw handle Stream.musa_stream gives. The caching allocator still carves
// blocks and caches; only the pool's segments come from, and go back to, these functions.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include <musa/runtime.h>

namespace torch_musa::allocator {

struct SegmentAllocator {
  using AllocFn = void* (*)(ssize_t size, int device, void* stream);
  using FreeFn = void (*)(void* ptr, ssize_t size, int device, void* stream);
  AllocFn alloc = nullptr;
  FreeFn free = nullptr;
  std::string description;  // "alloc_fn/free_fn from path", for errors and repr

  void* allocate(size_t size, int device, musaStream_t stream) const;
  void release(void* ptr, size_t size, int device, musaStream_t stream) const;
};

// Loads the two functions (dlopen + dlsym); a missing library or symbol is a clear error.
std::shared_ptr<SegmentAllocator> load_segment_allocator(const std::string& path, const std::string& alloc_fn,
                                                         const std::string& free_fn);

}  // namespace torch_musa::allocator
