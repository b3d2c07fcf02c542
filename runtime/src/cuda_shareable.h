// The cuda driver's shareable handles of VMM physical memory: CUDA exports a
// POSIX file descriptor; the handle names it in the exporting process, and the
// importer takes a copy of it with pidfd_getfd while the exporter runs.
// Included by cuda_driver.cpp only.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "driver.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

namespace musa_rt::cuda_shareable {

constexpr uint32_t kMagic = 0x4d435546;  // "MCUF"

struct Handle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
};

inline void describe(int fd, musaIpcMemHandle_t* out) {
  Handle h{kMagic, static_cast<int32_t>(getpid()), fd};
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->reserved, &h, sizeof h);
}

// A descriptor of this process for the exporter's file descriptor; the caller closes it.
inline musaError_t take(const musaIpcMemHandle_t& shareable, int* fd) {
  Handle h;
  std::memcpy(&h, shareable.reserved, sizeof h);
  if (h.magic != kMagic)
    return fail(musaErrorInvalidResourceHandle,
                "musaMemImportFromShareableHandle: not a cuda-driver shareable handle");
  if (h.pid == getpid()) {
    *fd = dup(h.fd);
    return *fd >= 0 ? musaSuccess : fail(musaErrorInvalidResourceHandle, std::string("dup: ") + strerror(errno));
  }
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, h.pid, 0));
  if (pidfd < 0)
    return fail(musaErrorInvalidResourceHandle,
                "musaMemImportFromShareableHandle: the process " + std::to_string(h.pid) +
                    " that shared the memory " + (errno == ESRCH ? "has exited" : std::string("cannot be reached: ") + strerror(errno)));
  *fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, h.fd, 0));
  int err = errno;
  close(pidfd);
  if (*fd < 0)
    return fail(musaErrorInvalidResourceHandle,
                "musaMemImportFromShareableHandle: pidfd_getfd on process " + std::to_string(h.pid) +
                    " failed: " + strerror(err) +
                    (err == EPERM ? " (it needs ptrace permission over the sender: same user, and "
                                    "/proc/sys/kernel/yama/ptrace_scope 0, or CAP_SYS_PTRACE)"
                                  : ""));
  return musaSuccess;
}

}  // namespace musa_rt::cuda_shareable
