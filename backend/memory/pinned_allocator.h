// Page-locked host memory for fast, asynchronous host<->musa copies, cached
// as CUDA's is: ATen's CachingHostAllocator reuses freed blocks once the musa
// streams that used them have passed events recorded at the free.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace torch_musa {
c10::Allocator* pinned_allocator();
// Tells the cache that `cpu`'s pinned block is used by work on `stream` (an
// asynchronous copy): the block is not reused before that work is done.
void note_pinned_use(const at::Tensor& cpu, c10::Stream stream);
}  // namespace torch_musa
