// A musa storage sent to another process and opened there (torch.cuda's
// _share_cuda_ / _new_shared_cuda): the sender gets a runtime IPC handle for
// the allocation holding the storage and keeps the storage for the receiver
// (sent_blocks.h); the receiver maps the allocation once per handle, whatever
// number of storages it holds in it, and lets it go with the last one.
#pragma once

#include <c10/core/Storage.h>

#include <optional>
#include <string>

#include "ipc/sent_blocks.h"

namespace torch_musa::ipc {

struct SharedStorage {
  c10::DeviceIndex device = 0;
  std::string handle;         // musaIpcMemHandle_t bytes; empty for an empty storage
  int64_t offset_bytes = 0;   // of the storage in the allocation
  int64_t nbytes = 0;
  CounterSlot counter;
  std::string event_handle;   // musaIpcEventHandle_t bytes; empty when no wait is needed
};

SharedStorage share(const c10::Storage& storage);
c10::Storage open(const SharedStorage& shared);
// At exit: lets every sender reuse what this process still holds of its memory (after this
// process's queued work), since storages may never be freed during interpreter finalization.
void release_all_received();

}  // namespace torch_musa::ipc
