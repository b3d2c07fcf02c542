// Reference counts of musa memory sent to other processes (CUDA IPC's
// CudaIPCSentData). The sender keeps each sent storage (and the event that
// orders the receiver after the sender's work) alive in a slot of a counter
// page, a small memfd both processes map. The receiver zeroes its slot when it
// lets the memory go; the sender drops storages whose slot is zero when it
// sends again, on torch.musa.ipc_collect(), and at exit.
#pragma once

#include <c10/core/Storage.h>
#include <musa/runtime.h>

#include <cstdint>

namespace torch_musa::ipc {

// Where a receiver finds its slot: the sender's counter page as
// /proc/<pid>/fd/<fd> (checked by inode) and the slot in it.
struct CounterSlot {
  int64_t pid = 0;
  int64_t fd = -1;
  int64_t inode = 0;
  int64_t slot = -1;
};

// Keeps `storage` (and `event`, destroyed with it; may be null) until the receiver releases the slot.
CounterSlot hold_for_receiver(c10::Storage storage, musaEvent_t event);
// Drops what receivers released; returns how many sent blocks are still held.
size_t collect();
// Receiver side: maps the sender's page (once per page) while the sender surely runs.
void attach(const CounterSlot& slot);
// Receiver side: marks the slot released.
void release(const CounterSlot& slot);

}  // namespace torch_musa::ipc
