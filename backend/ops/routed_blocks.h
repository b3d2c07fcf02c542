// Musa blocks lent to a kernel device's allocator. While a musa op runs, the
// kernel device's allocations (outputs, scratch) are musa blocks handed out as
// kernel-device DataPtrs whose context is the data pointer (raw_allocate
// requires that), so the owning musa DataPtr is kept here until the op adopts
// the block as a musa tensor's memory or the kernel frees it.
//
// Blocks lent during the running op stay in a small per-thread list: scratch
// frees and adoption of outputs, nearly always on the same thread and within
// the op, then take no lock and no table. What is still lent when the op ends
// (memory a library keeps, such as a workspace) moves to a shared table. A
// block freed by another thread while its op still runs is marked, and freed
// when that op ends.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_musa::routed_blocks {

// Records the owning musa DataPtr of a lent block.
void lend(c10::DataPtr musa);
// Takes back the owning musa DataPtr of the block at `p`; a null DataPtr if
// `p` is not a lent block.
c10::DataPtr take(void* p);
// The kernel device dropped its last reference to `p`: frees the block (now
// or, if another thread's running op holds it, when that op ends) and returns
// true; returns false if `p` is not lent (`known_lent`: the caller knows it is).
bool release(void* p, bool known_lent);
// Called when a kernel scope ends: this thread's lent blocks move to the
// shared table, unless a Hold is alive on this thread.
void end_op();

// Keeps this thread's lent blocks in its own list until the outermost Hold
// ends (then they move as by end_op()): a delegated call holds them while it
// adopts its outputs, so adoption takes no lock.
class Hold {
 public:
  Hold();
  ~Hold();
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
};

}  // namespace torch_musa::routed_blocks
