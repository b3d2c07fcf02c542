#include "host_ipc.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "driver.h"

namespace musa_rt {
namespace {

constexpr uint32_t kMemMagic = 0x4d495043;    // "MIPC"
constexpr uint32_t kEventMagic = 0x4d495045;  // "MIPE"

struct MemHandle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t device;
  uint64_t offset;
  uint64_t size;
  uint64_t inode;
  uint64_t fs_device;
};
static_assert(sizeof(MemHandle) <= sizeof(musaIpcMemHandle_t), "handle layout too large");

struct EventHandle {
  uint32_t magic;
  int32_t pid;
  int32_t device;
};
static_assert(sizeof(EventHandle) <= sizeof(musaIpcEventHandle_t), "handle layout too large");

}  // namespace

musaError_t hostIpcExport(const HostIpcRange& range, musaIpcMemHandle_t* out) {
  struct stat st {};
  if (fstat(range.fd, &st) != 0)
    return fail(musaErrorInvalidValue, std::string("musaIpcGetMemHandle: fstat of the memory's file failed: ") +
                                           strerror(errno));
  MemHandle h{kMemMagic, static_cast<int32_t>(getpid()), range.fd, range.device, range.offset, range.size,
              static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_dev)};
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->reserved, &h, sizeof h);
  return musaSuccess;
}

musaError_t hostIpcOpen(const musaIpcMemHandle_t& handle, HostIpcRange* range) {
  MemHandle h;
  std::memcpy(&h, handle.reserved, sizeof h);
  if (h.magic != kMemMagic)
    return fail(musaErrorInvalidResourceHandle,
                "not a host-driver memory handle (was it made by a process on the same machine with "
                "TORCH_MUSA_DRIVER=host?)");
  std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != h.inode ||
      static_cast<uint64_t>(st.st_dev) != h.fs_device) {
    int err = errno;
    if (fd >= 0) close(fd);
    bool gone = kill(h.pid, 0) != 0 && errno == ESRCH;
    return fail(musaErrorInvalidResourceHandle,
                "the musa memory shared by process " + std::to_string(h.pid) +
                    (gone ? " cannot be opened: that process has exited (the producer must keep running "
                            "until the consumer has received the tensor)"
                          : " cannot be opened: the memory was freed or the process replaced it (" +
                                std::string(fd < 0 ? strerror(err) : "a different file") + ")"));
  }
  *range = {fd, static_cast<size_t>(h.offset), static_cast<size_t>(h.size), h.device};
  return musaSuccess;
}

musaError_t hostIpcMap(const musaIpcMemHandle_t& handle, void** ptr, HostIpcRange* range) {
  if (auto e = hostIpcOpen(handle, range)) return e;
  void* p = mmap(nullptr, range->size, PROT_READ | PROT_WRITE, MAP_SHARED, range->fd,
                 static_cast<off_t>(range->offset));
  int err = errno;
  close(range->fd);  // the mapping keeps the file alive
  range->fd = -1;
  if (p == MAP_FAILED) return fail(musaErrorMemoryAllocation, std::string("mmap failed: ") + strerror(err));
  *ptr = p;
  return musaSuccess;
}

void hostIpcExportEvent(int device, musaIpcEventHandle_t* out) {
  EventHandle h{kEventMagic, static_cast<int32_t>(getpid()), device};
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->reserved, &h, sizeof h);
}

musaError_t hostIpcOpenEvent(const musaIpcEventHandle_t& handle, int* device) {
  EventHandle h;
  std::memcpy(&h, handle.reserved, sizeof h);
  if (h.magic != kEventMagic)
    return fail(musaErrorInvalidResourceHandle, "musaIpcOpenEventHandle: not a host-driver event handle");
  *device = h.device;
  return musaSuccess;
}

}  // namespace musa_rt
