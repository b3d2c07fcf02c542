// Device and pinned memory: allocation accounting, out-of-memory, copies,
// memset and pointer attributes.
#include "test_support.h"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

class MemoryTest : public ::testing::Test {
 protected:
  void TearDown() override { musaSetDevice(0); musaGetLastError(); }
  static size_t FreeBytes() {
    size_t f = 0, t = 0;
    EXPECT_MUSA(musaMemGetInfo(&f, &t));
    return f;
  }
};

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

TEST_F(MemoryTest, MemGetInfoTotalIsCapacity) {
  size_t f = 0, t = 0;
  ASSERT_MUSA(musaMemGetInfo(&f, &t));
  EXPECT_EQ(t, 8 * kGiB);
  EXPECT_LE(f, t);
  EXPECT_MUSA(musaMemGetInfo(nullptr, nullptr));
}

TEST_F(MemoryTest, MallocFreeAccounting) {
  size_t before = FreeBytes();
  void* a = nullptr;
  ASSERT_MUSA(musaMalloc(&a, 10 * kMiB));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(FreeBytes(), before - 10 * kMiB);
  void* b = nullptr;
  ASSERT_MUSA(musaMalloc(&b, 1));  // rounded up to a 4KiB page
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(FreeBytes(), before - 10 * kMiB - 4096);
  ASSERT_MUSA(musaFree(a));
  EXPECT_EQ(FreeBytes(), before - 4096);
  ASSERT_MUSA(musaFree(b));
  EXPECT_EQ(FreeBytes(), before);
}

TEST_F(MemoryTest, AccountingIsPerDevice) {
  size_t free0 = FreeBytes();
  ASSERT_MUSA(musaSetDevice(1));
  size_t free1 = FreeBytes();
  void* p = nullptr;
  ASSERT_MUSA(musaMalloc(&p, 6 * kMiB));
  EXPECT_EQ(FreeBytes(), free1 - 6 * kMiB);
  ASSERT_MUSA(musaSetDevice(0));
  EXPECT_EQ(FreeBytes(), free0) << "an allocation on device 1 was charged to device 0";
  ASSERT_MUSA(musaFree(p));  // free does not need the owning device to be current
  ASSERT_MUSA(musaSetDevice(1));
  EXPECT_EQ(FreeBytes(), free1);
}

TEST_F(MemoryTest, MallocZeroAndNull) {
  void* p = reinterpret_cast<void*>(0x1);
  ASSERT_MUSA(musaMalloc(&p, 0));
  EXPECT_EQ(p, nullptr);
  EXPECT_MUSA(musaFree(nullptr));
  EXPECT_EQ(musaMalloc(nullptr, 64), musaErrorInvalidValue);
}

TEST_F(MemoryTest, FreeOfForeignPointerFails) {
  int local = 0;
  size_t before = FreeBytes();
  EXPECT_EQ(musaFree(&local), musaErrorInvalidValue);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("musaMalloc"), std::string::npos);
  void* p = nullptr;
  ASSERT_MUSA(musaMalloc(&p, 8192));
  EXPECT_EQ(musaFree(static_cast<char*>(p) + 16), musaErrorInvalidValue) << "interior pointer freed";
  ASSERT_MUSA(musaFree(p));
  EXPECT_EQ(musaFree(p), musaErrorInvalidValue) << "double free accepted";
  EXPECT_EQ(FreeBytes(), before);
}

TEST_F(MemoryTest, OutOfMemoryThenStillUsable) {
  size_t free_before = 0, total = 0;
  ASSERT_MUSA(musaMemGetInfo(&free_before, &total));
  void* p = nullptr;
  musaGetLastError();
  EXPECT_EQ(musaMalloc(&p, total + 4096), musaErrorMemoryAllocation);
  EXPECT_EQ(musaGetLastError(), musaErrorMemoryAllocation);
  std::string msg = musaGetLastErrorMessage();
  EXPECT_NE(msg.find("out of memory on musa device 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tried to allocate 8.00 GiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("free of 8.00 GiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TORCH_MUSA_HOST_MEMORY"), std::string::npos) << msg;

  EXPECT_EQ(musaMalloc(&p, 100 * kGiB), musaErrorMemoryAllocation);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("100.00 GiB"), std::string::npos)
      << musaGetLastErrorMessage();
  EXPECT_EQ(FreeBytes(), free_before) << "a failed allocation leaked capacity";

  // The device is still usable after the failure.
  void* q = nullptr;
  ASSERT_MUSA(musaMalloc(&q, kMiB));
  ASSERT_MUSA(musaMemset(q, 0x5a, kMiB));
  std::vector<uint8_t> host(kMiB);
  ASSERT_MUSA(musaMemcpy(host.data(), q, kMiB, musaMemcpyDeviceToHost));
  for (size_t i = 0; i < kMiB; i += 4093) ASSERT_EQ(host[i], 0x5a) << i;
  ASSERT_MUSA(musaFree(q));
  EXPECT_EQ(FreeBytes(), free_before);
}

TEST_F(MemoryTest, BlockingMemcpyRoundTrip) {
  const size_t n = 3 * kMiB + 123;
  auto src = Pattern(n, 3);
  std::vector<uint8_t> back(n, 0);
  void* d1 = nullptr;
  void* d2 = nullptr;
  ASSERT_MUSA(musaMalloc(&d1, n));
  ASSERT_MUSA(musaMalloc(&d2, n));
  ASSERT_MUSA(musaMemcpy(d1, src.data(), n, musaMemcpyHostToDevice));
  ASSERT_MUSA(musaMemcpy(d2, d1, n, musaMemcpyDeviceToDevice));
  ASSERT_MUSA(musaMemcpy(back.data(), d2, n, musaMemcpyDeviceToHost));
  EXPECT_EQ(back, src);
  // Default kind, partial copy at an offset.
  std::vector<uint8_t> part(100, 0);
  ASSERT_MUSA(musaMemcpy(part.data(), static_cast<uint8_t*>(d2) + 1000, 100, musaMemcpyDefault));
  EXPECT_TRUE(std::equal(part.begin(), part.end(), src.begin() + 1000));
  ASSERT_MUSA(musaFree(d1));
  ASSERT_MUSA(musaFree(d2));
}

TEST_F(MemoryTest, BlockingMemset) {
  const size_t n = 64 * 1024;
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, n));
  ASSERT_MUSA(musaMemset(d, 0x11, n));
  ASSERT_MUSA(musaMemset(static_cast<uint8_t*>(d) + 100, 0x1ff, 50));  // value is truncated to a byte
  std::vector<uint8_t> back(n);
  ASSERT_MUSA(musaMemcpy(back.data(), d, n, musaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    uint8_t want = (i >= 100 && i < 150) ? 0xff : 0x11;
    ASSERT_EQ(back[i], want) << "byte " << i;
  }
  ASSERT_MUSA(musaFree(d));
}

TEST_F(MemoryTest, ZeroSizedAndNullCopies) {
  EXPECT_MUSA(musaMemcpy(nullptr, nullptr, 0, musaMemcpyDefault));
  EXPECT_MUSA(musaMemset(nullptr, 0, 0));
  uint8_t b = 0;
  EXPECT_EQ(musaMemcpy(nullptr, &b, 1, musaMemcpyHostToDevice), musaErrorInvalidValue);
  EXPECT_EQ(musaMemcpy(&b, nullptr, 1, musaMemcpyDeviceToHost), musaErrorInvalidValue);
  EXPECT_EQ(musaMemset(nullptr, 0, 1), musaErrorInvalidValue);
  EXPECT_EQ(musaMemcpyAsync(nullptr, &b, 1, musaMemcpyHostToDevice, nullptr), musaErrorInvalidValue);
  EXPECT_EQ(musaMemsetAsync(nullptr, 0, 1, nullptr), musaErrorInvalidValue);
}

TEST_F(MemoryTest, AsyncCopiesOnStream) {
  const size_t n = 256 * 1024;
  auto src = Pattern(n, 42);
  std::vector<uint8_t> back(n, 0);
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, n));
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  ASSERT_MUSA(musaMemsetAsync(d, 0, n, s));
  ASSERT_MUSA(musaMemcpyAsync(d, src.data(), n / 2, musaMemcpyHostToDevice, s));
  ASSERT_MUSA(musaMemsetAsync(static_cast<uint8_t*>(d) + n / 2, 0x77, n / 4, s));
  ASSERT_MUSA(musaMemcpyAsync(back.data(), d, n, musaMemcpyDeviceToHost, s));
  ASSERT_MUSA(musaStreamSynchronize(s));
  for (size_t i = 0; i < n; ++i) {
    uint8_t want = i < n / 2 ? src[i] : (i < 3 * n / 4 ? 0x77 : 0);
    ASSERT_EQ(back[i], want) << "byte " << i;
  }
  ASSERT_MUSA(musaStreamDestroy(s));
  ASSERT_MUSA(musaFree(d));
}

TEST_F(MemoryTest, AsyncCopiesOnDefaultStream) {
  const size_t n = 4096;
  auto src = Pattern(n, 9);
  std::vector<uint8_t> back(n, 0);
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, n));
  ASSERT_MUSA(musaMemcpyAsync(d, src.data(), n, musaMemcpyHostToDevice, nullptr));
  ASSERT_MUSA(musaMemsetAsync(d, 0xee, 10, nullptr));
  ASSERT_MUSA(musaMemcpyAsync(back.data(), d, n, musaMemcpyDeviceToHost, nullptr));
  ASSERT_MUSA(musaStreamSynchronize(nullptr));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], i < 10 ? 0xee : src[i]) << i;
  ASSERT_MUSA(musaFree(d));
}

TEST_F(MemoryTest, PinnedHostMemory) {
  void* h = nullptr;
  ASSERT_MUSA(musaHostAlloc(&h, 10000));
  ASSERT_NE(h, nullptr);
  auto src = Pattern(10000, 1);
  std::memcpy(h, src.data(), src.size());  // pinned memory is host-accessible
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, 10000));
  ASSERT_MUSA(musaMemcpy(d, h, 10000, musaMemcpyHostToDevice));
  std::memset(h, 0, 10000);
  ASSERT_MUSA(musaMemcpy(h, d, 10000, musaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(h, src.data(), 10000), 0);
  EXPECT_EQ(musaFree(h), musaErrorInvalidValue) << "musaFree accepted a pinned pointer";
  EXPECT_EQ(musaFreeHost(d), musaErrorInvalidValue) << "musaFreeHost accepted a device pointer";
  ASSERT_MUSA(musaFreeHost(h));
  EXPECT_EQ(musaFreeHost(h), musaErrorInvalidValue) << "double musaFreeHost accepted";
  ASSERT_MUSA(musaFree(d));
  EXPECT_MUSA(musaFreeHost(nullptr));
  void* z = reinterpret_cast<void*>(0x1);
  EXPECT_MUSA(musaHostAlloc(&z, 0));
  EXPECT_EQ(z, nullptr);
  EXPECT_EQ(musaHostAlloc(nullptr, 16), musaErrorInvalidValue);
}

TEST_F(MemoryTest, MappedHostMemoryIsAddressedByTheDeviceInPlace) {
  void* h = nullptr;
  ASSERT_MUSA(musaHostAlloc(&h, 4096, musaHostAllocPortable | musaHostAllocMapped));
  auto src = Pattern(4096, 3);
  std::memcpy(h, src.data(), src.size());
  void* dh = nullptr;
  ASSERT_MUSA(musaHostGetDevicePointer(&dh, h, 0));
  ASSERT_NE(dh, nullptr);
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, 4096));
  ASSERT_MUSA(musaMemcpy(d, dh, 4096, musaMemcpyDeviceToDevice));  // reads the host bytes as device memory
  std::vector<unsigned char> back(4096);
  ASSERT_MUSA(musaMemcpy(back.data(), d, 4096, musaMemcpyDeviceToHost));
  EXPECT_EQ(std::memcmp(back.data(), src.data(), 4096), 0);
  ASSERT_MUSA(musaMemset(dh, 0x5a, 16));  // a device write lands in the host memory
  EXPECT_EQ(static_cast<unsigned char*>(h)[15], 0x5a);
  void* bad = nullptr;
  EXPECT_EQ(musaHostGetDevicePointer(&bad, h, 1), musaErrorInvalidValue) << "flags other than 0 accepted";
  int local = 0;
  EXPECT_EQ(musaHostGetDevicePointer(&bad, &local, 0), musaErrorInvalidValue) << "unmapped memory accepted";
  (void)musaGetLastError();
  EXPECT_EQ(musaHostAlloc(&bad, 16, 0x80), musaErrorInvalidValue) << "unknown flags accepted";
  ASSERT_MUSA(musaFree(d));
  ASSERT_MUSA(musaFreeHost(h));
}

TEST_F(MemoryTest, PinnedAllocationIsNotChargedToTheDevice) {
  size_t before = FreeBytes();
  void* h = nullptr;
  ASSERT_MUSA(musaHostAlloc(&h, 4 * kMiB));
  EXPECT_EQ(FreeBytes(), before);
  ASSERT_MUSA(musaFreeHost(h));
}

TEST_F(MemoryTest, PointerAttributes) {
  void* d0 = nullptr;
  ASSERT_MUSA(musaMalloc(&d0, 3 * 4096));
  ASSERT_MUSA(musaSetDevice(1));
  void* d1 = nullptr;
  ASSERT_MUSA(musaMalloc(&d1, 4096));
  ASSERT_MUSA(musaSetDevice(0));
  void* h = nullptr;
  ASSERT_MUSA(musaHostAlloc(&h, 1000));
  int local = 0;
  std::vector<int> heap(10);

  musaPointerAttributes a{};
  ASSERT_MUSA(musaPointerGetAttributes(&a, d0));
  EXPECT_EQ(a.type, musaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  ASSERT_MUSA(musaPointerGetAttributes(&a, static_cast<char*>(d0) + 2 * 4096 + 5));  // interior
  EXPECT_EQ(a.type, musaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  ASSERT_MUSA(musaPointerGetAttributes(&a, d1));
  EXPECT_EQ(a.type, musaMemoryTypeDevice);
  EXPECT_EQ(a.device, 1);

  ASSERT_MUSA(musaPointerGetAttributes(&a, h));
  EXPECT_EQ(a.type, musaMemoryTypeHost);
  ASSERT_MUSA(musaPointerGetAttributes(&a, static_cast<char*>(h) + 999));
  EXPECT_EQ(a.type, musaMemoryTypeHost);

  ASSERT_MUSA(musaPointerGetAttributes(&a, &local));
  EXPECT_EQ(a.type, musaMemoryTypeUnregistered);
  EXPECT_EQ(a.device, -1);
  ASSERT_MUSA(musaPointerGetAttributes(&a, heap.data()));
  EXPECT_EQ(a.type, musaMemoryTypeUnregistered);
  ASSERT_MUSA(musaPointerGetAttributes(&a, nullptr));
  EXPECT_EQ(a.type, musaMemoryTypeUnregistered);

  ASSERT_MUSA(musaFree(d0));
  ASSERT_MUSA(musaFree(d1));
  ASSERT_MUSA(musaFreeHost(h));
  // Once freed, pointers are no longer known to the runtime.
  ASSERT_MUSA(musaPointerGetAttributes(&a, d0));
  EXPECT_EQ(a.type, musaMemoryTypeUnregistered);
  ASSERT_MUSA(musaPointerGetAttributes(&a, h));
  EXPECT_EQ(a.type, musaMemoryTypeUnregistered);

  EXPECT_EQ(musaPointerGetAttributes(nullptr, &local), musaErrorInvalidValue);
}

}  // namespace
