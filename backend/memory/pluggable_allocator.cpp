#include "memory/pluggable_allocator.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>

namespace torch_musa::allocator {
namespace {

// The raw handle users see for a stream (Stream.musa_stream): the driver's own where it has one.
void* raw_handle(musaStream_t stream) {
  void* native = nullptr;
  if (stream && musaStreamGetNativeHandle(stream, &native) == musaSuccess && native) return native;
  return stream;
}

}  // namespace

void* SegmentAllocator::allocate(size_t size, int device, musaStream_t stream) const {
  return alloc(static_cast<ssize_t>(size), device, raw_handle(stream));
}

void SegmentAllocator::release(void* ptr, size_t size, int device, musaStream_t stream) const {
  free(ptr, static_cast<ssize_t>(size), device, raw_handle(stream));
}

std::shared_ptr<SegmentAllocator> load_segment_allocator(const std::string& path, const std::string& alloc_fn,
                                                         const std::string& free_fn) {
  // (The library stays loaded: segments it made may outlive every Python reference to it.)
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(lib, "MUSAPluggableAllocator: cannot load '", path, "' (", dlerror(),
              "): pass the path of a shared library that exports the allocation functions");
  auto find = [&](const std::string& name) {
    void* f = dlsym(lib, name.c_str());
    TORCH_CHECK(f, "MUSAPluggableAllocator: '", path, "' has no function '", name,
                "': export it with C linkage (extern \"C\"), or pass the name it has");
    return f;
  };
  auto a = std::make_shared<SegmentAllocator>();
  a->alloc = reinterpret_cast<SegmentAllocator::AllocFn>(find(alloc_fn));
  a->free = reinterpret_cast<SegmentAllocator::FreeFn>(find(free_fn));
  a->description = alloc_fn + "/" + free_fn + " from " + path;
  return a;
}

}  // namespace torch_musa::allocator
