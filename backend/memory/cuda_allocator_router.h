// Routes torch's CUDA allocator: while a musa op runs on this thread, CUDA
// tensor allocations (a CUDA kernel's outputs and scratch) come from musa
// memory; all other CUDA allocations go to torch's own caching allocator,
// untouched. Installed once by the cuda kernel device.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

namespace torch_musa::cuda_router {

// Installs the router in front of torch's CUDA allocator (idempotent).
void install();

// Marks the calling thread as running an op of musa device `musa_index`
// (-1: none); returns the previous value.
c10::DeviceIndex set_delegating(c10::DeviceIndex musa_index);

// A non-owning CUDA DataPtr-backed allocator for alias storages: growing an
// alias (resize_) allocates musa memory.
c10::Allocator* alias_allocator();

// If `ptr` was allocated from musa memory by the router, replaces it with the
// musa DataPtr that owns the memory and returns true.
bool adopt(c10::DataPtr& ptr);

}  // namespace torch_musa::cuda_router
