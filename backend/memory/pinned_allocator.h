// Page-locked host memory for fast, asynchronous host<->musa copies, cached
// as CUDA's is: ATen's CachingHostAllocator reuses freed blocks once the musa
// streams that used them have passed events recorded at the free.
#pragma once

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace torch_musa {
c10::Allocator* pinned_allocator();
// Tells the cache that `cpu`'s pinned block is used by work on `stream` (an
// asynchronous copy): the block is not reused before that work is done.
void note_pinned_use(const at::Tensor& cpu, c10::Stream stream);
// The pinned cache's statistics (torch.musa.host_memory_stats), and their resets.
at::HostStats pinned_stats();
void reset_pinned_accumulated_stats();
void reset_pinned_peak_stats();
}  // namespace torch_musa
