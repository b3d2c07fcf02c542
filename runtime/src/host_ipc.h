// The host driver's handles for sharing device memory and events between
// processes. Its device memory lives in memfd files, so a memory handle names
// the file through the exporting process (/proc/<pid>/fd/<fd>, checked by
// inode, so a reused pid or fd number is refused) and the range in it. An
// opened mapping shares the file's pages, and keeps them alive after the
// exporter exits, as the mapping holds the file.
#pragma once

#include <musa/runtime.h>

#include <cstddef>
#include <string>

namespace musa_rt {

struct HostIpcRange {
  int fd;         // the memfd in this process
  size_t offset;  // of the allocation in the file
  size_t size;
  int device;     // physical device
};

musaError_t hostIpcExport(const HostIpcRange& range, musaIpcMemHandle_t* out);
// Opens the handle's file here: `range` gets a new descriptor (the caller closes it), offset, size, device.
musaError_t hostIpcOpen(const musaIpcMemHandle_t& handle, HostIpcRange* range);
// Maps the handle's range (MAP_SHARED) at a new address; `range` gets its device and size (fd = -1).
musaError_t hostIpcMap(const musaIpcMemHandle_t& handle, void** ptr, HostIpcRange* range);

// Host events are complete when recorded (work runs inline), so an event handle
// only carries the device; an opened event is always complete.
void hostIpcExportEvent(int device, musaIpcEventHandle_t* out);
musaError_t hostIpcOpenEvent(const musaIpcEventHandle_t& handle, int* device);

}  // namespace musa_rt
