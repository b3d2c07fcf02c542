// Musa blocks lent to a kernel device's allocator. While a musa op runs, the
// kernel device's allocations (outputs, scratch) are musa blocks handed out as
// kernel-device DataPtrs whose context is the data pointer (raw_allocate
// requires that), so the owning musa DataPtr is kept here until the op adopts
// the block as a musa tensor's memory or the kernel frees it.
//
// Blocks lent during the running op stay in a small per-thread list: adoption
// and scratch frees, nearly always on the same thread and within the op, then
// take no lock and no table. What is still lent when the op ends (memory a
// library keeps, e.g. a workspace) moves to a shared table.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_musa::routed_blocks {

// Records the owning musa DataPtr of a lent block.
void lend(c10::DataPtr musa);
// Takes back the owning musa DataPtr of the block at `p`; a null DataPtr if
// `p` is not a lent block.
c10::DataPtr take(void* p);
// Called when an op ends: this thread's lent blocks move to the shared table.
void end_op();

}  // namespace torch_musa::routed_blocks
