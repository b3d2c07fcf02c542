// Sharing between processes on the host driver: a memory handle names the
// allocation's file range (opened here through /proc/self, as another process
// would open it through /proc/<pid>), and event handles need interprocess events.
#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace {

TEST(IpcTest, AddressRangeAndHandleMapTheSameMemory) {
  ASSERT_MUSA(musaSetDevice(0));
  char* p = nullptr;
  ASSERT_MUSA(musaMalloc(reinterpret_cast<void**>(&p), 3 * kMiB));
  void* base = nullptr;
  size_t size = 0;
  ASSERT_MUSA(musaMemGetAddressRange(&base, &size, p + 5000));
  EXPECT_EQ(base, p);
  EXPECT_GE(size, 3 * kMiB);

  musaIpcMemHandle_t h;
  ASSERT_MUSA(musaIpcGetMemHandle(&h, p + 5000));  // any pointer inside names the whole allocation
  char* opened = nullptr;
  ASSERT_MUSA(musaIpcOpenMemHandle(reinterpret_cast<void**>(&opened), h, musaIpcMemLazyEnablePeerAccess));
  ASSERT_NE(opened, p);
  std::memset(p, 0, 16);
  ASSERT_MUSA(musaMemset(p + 8, 0x5a, 4));
  EXPECT_EQ(opened[8], 0x5a);  // one memory, two mappings
  opened[100] = 7;
  EXPECT_EQ(p[100], 7);
  musaPointerAttributes a;
  ASSERT_MUSA(musaPointerGetAttributes(&a, opened + 10));
  EXPECT_EQ(a.type, musaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  // Opened memory is shared from the process that allocated it, not re-shared.
  musaIpcMemHandle_t again;
  EXPECT_EQ(musaIpcGetMemHandle(&again, opened), musaErrorInvalidValue);
  ASSERT_MUSA(musaIpcCloseMemHandle(opened));
  EXPECT_EQ(musaIpcCloseMemHandle(opened), musaErrorInvalidValue);
  ASSERT_MUSA(musaFree(p));
  musaGetLastError();
}

TEST(IpcTest, HandleOfAnExitedProcessIsAClearError) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {  // a fresh process: its own device memory
    void* p = nullptr;
    musaIpcMemHandle_t h{};
    if (musaMalloc(&p, kMiB) == musaSuccess) musaIpcGetMemHandle(&h, p);
    (void)!write(fds[1], &h, sizeof h);
    _exit(0);
  }
  musaIpcMemHandle_t h;
  ASSERT_EQ(read(fds[0], &h, sizeof h), static_cast<ssize_t>(sizeof h));
  waitpid(child, nullptr, 0);
  void* opened = nullptr;
  EXPECT_EQ(musaIpcOpenMemHandle(&opened, h, 0), musaErrorInvalidResourceHandle);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("has exited"), std::string::npos);
  musaGetLastError();
  close(fds[0]);
  close(fds[1]);
}

TEST(IpcTest, EventHandlesNeedInterprocessEvents) {
  ASSERT_MUSA(musaSetDevice(0));
  musaEvent_t plain = nullptr, shared = nullptr, opened = nullptr;
  EXPECT_EQ(musaEventCreateWithFlags(&plain, musaEventInterprocess), musaErrorInvalidValue);  // timing on
  ASSERT_MUSA(musaEventCreateWithFlags(&plain, musaEventDisableTiming));
  musaIpcEventHandle_t h;
  EXPECT_EQ(musaIpcGetEventHandle(&h, plain), musaErrorInvalidResourceHandle);
  ASSERT_MUSA(musaEventCreateWithFlags(&shared, musaEventDisableTiming | musaEventInterprocess));
  ASSERT_MUSA(musaEventRecord(shared, nullptr));
  ASSERT_MUSA(musaIpcGetEventHandle(&h, shared));
  ASSERT_MUSA(musaIpcOpenEventHandle(&opened, h));
  EXPECT_MUSA(musaEventQuery(opened));
  EXPECT_MUSA(musaEventSynchronize(opened));
  for (auto e : {plain, shared, opened}) EXPECT_MUSA(musaEventDestroy(e));
  musaGetLastError();
}

}  // namespace
