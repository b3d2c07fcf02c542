// Virtual memory management: reserve address space, create physical chunks,
// map, grant access, unmap, release.
#include "test_support.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kGran = 2 * kMiB;

class VmmTest : public ::testing::Test {
 protected:
  void TearDown() override { musaSetDevice(0); musaGetLastError(); }
  static size_t FreeBytes() {
    size_t f = 0, t = 0;
    EXPECT_MUSA(musaMemGetInfo(&f, &t));
    return f;
  }
};

uintptr_t Addr(void* p) { return reinterpret_cast<uintptr_t>(p); }

// The /proc/self/maps line of the host mapping that contains `p` ("" if none):
// shows what the host driver really has at an address (permissions, backing).
std::string HostMapping(void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && Addr(p) >= lo && Addr(p) < hi)
      return line;
  }
  return "";
}
void* Off(void* p, size_t off) { return static_cast<char*>(p) + off; }

void Fill(void* dst, size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed ^ (i * 13) ^ (i >> 12));
  ASSERT_MUSA(musaMemcpy(dst, v.data(), n, musaMemcpyHostToDevice));
}

// Checks that `n` bytes at `src` hold the Fill pattern of `seed` starting at
// pattern offset `pat_off`.
void ExpectPattern(void* src, size_t n, uint8_t seed, size_t pat_off = 0) {
  std::vector<uint8_t> v(n);
  ASSERT_MUSA(musaMemcpy(v.data(), src, n, musaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    size_t j = i + pat_off;
    ASSERT_EQ(v[i], static_cast<uint8_t>(seed ^ (j * 13) ^ (j >> 12))) << "byte " << i;
  }
}

TEST_F(VmmTest, Granularity) {
  size_t g = 0;
  ASSERT_MUSA(musaMemGetAllocationGranularity(&g, 0));
  EXPECT_EQ(g, kGran);
  ASSERT_MUSA(musaMemGetAllocationGranularity(&g, 1));
  EXPECT_EQ(g, kGran);
  EXPECT_EQ(musaMemGetAllocationGranularity(nullptr, 0), musaErrorInvalidValue);
}

TEST_F(VmmTest, ReserveIsAlignedAndFree) {
  size_t before = FreeBytes();
  void* p = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&p, 16 * kGran, 0));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(Addr(p) % kGran, 0u);
  EXPECT_EQ(FreeBytes(), before) << "reserving address space must not use device memory";
  void* q = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&q, kGran, 32 * kMiB));
  EXPECT_EQ(Addr(q) % (32 * kMiB), 0u) << "requested alignment not honoured";
  EXPECT_TRUE(Addr(q) + kGran <= Addr(p) || Addr(p) + 16 * kGran <= Addr(q)) << "reservations overlap";
  ASSERT_MUSA(musaMemAddressFree(p, 16 * kGran));
  ASSERT_MUSA(musaMemAddressFree(q, kGran));
}

TEST_F(VmmTest, ReserveErrors) {
  void* p = nullptr;
  EXPECT_EQ(musaMemAddressReserve(&p, kGran + 4096, 0), musaErrorInvalidValue);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("granularity"), std::string::npos);
  EXPECT_EQ(musaMemAddressReserve(&p, 0, 0), musaErrorInvalidValue);
  EXPECT_EQ(musaMemAddressReserve(nullptr, kGran, 0), musaErrorInvalidValue);
  ASSERT_MUSA(musaMemAddressReserve(&p, 2 * kGran, 0));
  EXPECT_EQ(musaMemAddressFree(p, kGran), musaErrorInvalidValue) << "freed with the wrong size";
  EXPECT_EQ(musaMemAddressFree(Off(p, kGran), kGran), musaErrorInvalidValue) << "freed a sub-range";
  ASSERT_MUSA(musaMemAddressFree(p, 2 * kGran));
  EXPECT_EQ(musaMemAddressFree(p, 2 * kGran), musaErrorInvalidValue) << "double free accepted";
}

TEST_F(VmmTest, CreateErrors) {
  musaMemGenericAllocationHandle_t h = 0;
  size_t before = FreeBytes();
  EXPECT_EQ(musaMemCreate(&h, kGran + 1, 0), musaErrorInvalidValue);
  EXPECT_EQ(musaMemCreate(&h, 0, 0), musaErrorInvalidValue);
  EXPECT_EQ(musaMemCreate(nullptr, kGran, 0), musaErrorInvalidValue);
  EXPECT_EQ(musaMemCreate(&h, 16 * kGiB, 0), musaErrorMemoryAllocation);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("16.00 GiB"), std::string::npos)
      << musaGetLastErrorMessage();
  EXPECT_EQ(musaMemCreate(&h, kGran, 5), musaErrorInvalidDevice);
  EXPECT_EQ(FreeBytes(), before);
  EXPECT_EQ(musaMemRelease(0xdeadbeef), musaErrorInvalidValue);
}

TEST_F(VmmTest, MapWriteReadUnmapRemap) {
  size_t before = FreeBytes();
  void* va = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&va, 4 * kGran, 0));
  musaMemGenericAllocationHandle_t h = 0;
  ASSERT_MUSA(musaMemCreate(&h, kGran, 0));
  EXPECT_EQ(FreeBytes(), before - kGran) << "physical memory is charged at creation";

  std::string m = HostMapping(Off(va, kGran));
  EXPECT_NE(m.find(" ---p "), std::string::npos) << "reserved space must be inaccessible: " << m;
  ASSERT_MUSA(musaMemMap(va, kGran, 0, h));
  m = HostMapping(va);
  EXPECT_NE(m.find("musa-physical"), std::string::npos) << "not backed by the chunk: " << m;
  EXPECT_NE(m.find(" ---s "), std::string::npos) << "mapped memory needs musaMemSetAccess: " << m;
  ASSERT_MUSA(musaMemSetAccess(va, kGran, 0));
  m = HostMapping(va);
  EXPECT_NE(m.find(" rw-s "), std::string::npos) << m;
  musaPointerAttributes a{};
  ASSERT_MUSA(musaPointerGetAttributes(&a, Off(va, 100)));
  EXPECT_EQ(a.type, musaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);

  Fill(va, kGran, 0x3c);
  ExpectPattern(va, kGran, 0x3c);
  static_cast<volatile uint8_t*>(va)[kGran - 1] = 0xa5;  // host driver: directly addressable
  uint8_t last = 0;
  ASSERT_MUSA(musaMemcpy(&last, Off(va, kGran - 1), 1, musaMemcpyDeviceToHost));
  EXPECT_EQ(last, 0xa5);

  // Unmapping keeps the reservation and the physical memory (still charged).
  ASSERT_MUSA(musaMemUnmap(va, kGran));
  EXPECT_EQ(FreeBytes(), before - kGran);
  m = HostMapping(va);
  EXPECT_NE(m.find(" ---p "), std::string::npos) << "unmap must leave the range reserved: " << m;
  EXPECT_EQ(m.find("musa-physical"), std::string::npos) << "still backed after unmap: " << m;
  ASSERT_MUSA(musaPointerGetAttributes(&a, va));
  EXPECT_EQ(a.type, musaMemoryTypeUnregistered);

  // The same chunk mapped at another place of the reservation keeps its bytes.
  ASSERT_MUSA(musaMemMap(Off(va, 2 * kGran), kGran, 0, h));
  ASSERT_MUSA(musaMemSetAccess(Off(va, 2 * kGran), kGran, 0));
  ExpectPattern(Off(va, 2 * kGran), kGran - 1, 0x3c);
  // And it can be remapped at the original address.
  ASSERT_MUSA(musaMemUnmap(Off(va, 2 * kGran), kGran));
  ASSERT_MUSA(musaMemMap(va, kGran, 0, h));
  ASSERT_MUSA(musaMemSetAccess(va, kGran, 0));
  ExpectPattern(va, 4096, 0x3c);

  ASSERT_MUSA(musaMemUnmap(va, kGran));
  ASSERT_MUSA(musaMemRelease(h));
  EXPECT_EQ(FreeBytes(), before);
  ASSERT_MUSA(musaMemAddressFree(va, 4 * kGran));
}

TEST_F(VmmTest, TwoChunksMappedContiguouslyReadAsOneRange) {
  void* va = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&va, 2 * kGran, 0));
  musaMemGenericAllocationHandle_t h1 = 0, h2 = 0;
  ASSERT_MUSA(musaMemCreate(&h1, kGran, 0));
  ASSERT_MUSA(musaMemCreate(&h2, kGran, 0));
  EXPECT_NE(h1, h2);
  ASSERT_MUSA(musaMemMap(va, kGran, 0, h1));
  ASSERT_MUSA(musaMemMap(Off(va, kGran), kGran, 0, h2));
  ASSERT_MUSA(musaMemSetAccess(va, 2 * kGran, 0));  // one call across both mappings

  // One copy across the seam, read back as one range.
  Fill(va, 2 * kGran, 0x71);
  ExpectPattern(va, 2 * kGran, 0x71);
  ExpectPattern(Off(va, kGran - 64), 128, 0x71, kGran - 64);
  // A device-to-device copy across the seam.
  ASSERT_MUSA(musaMemcpy(Off(va, kGran - 10), Off(va, 0), 20, musaMemcpyDeviceToDevice));
  ExpectPattern(Off(va, kGran - 10), 20, 0x71, 0);

  // The second half really lives in h2: map h2 alone at the start and look.
  ASSERT_MUSA(musaMemUnmap(va, kGran));
  ASSERT_MUSA(musaMemUnmap(Off(va, kGran), kGran));
  ASSERT_MUSA(musaMemMap(va, kGran, 0, h2));
  ASSERT_MUSA(musaMemSetAccess(va, kGran, 0));
  ExpectPattern(Off(va, 64), kGran - 64, 0x71, kGran + 64);
  ASSERT_MUSA(musaMemUnmap(va, kGran));

  ASSERT_MUSA(musaMemRelease(h1));
  ASSERT_MUSA(musaMemRelease(h2));
  ASSERT_MUSA(musaMemAddressFree(va, 2 * kGran));
}

TEST_F(VmmTest, MapWithOffsetIntoLargerChunk) {
  void* va = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&va, 2 * kGran, 0));
  musaMemGenericAllocationHandle_t h = 0;
  ASSERT_MUSA(musaMemCreate(&h, 2 * kGran, 0));
  ASSERT_MUSA(musaMemMap(va, 2 * kGran, 0, h));
  ASSERT_MUSA(musaMemSetAccess(va, 2 * kGran, 0));
  Fill(va, 2 * kGran, 0x05);
  ASSERT_MUSA(musaMemUnmap(va, 2 * kGran));
  // Map only the second granule of the chunk.
  ASSERT_MUSA(musaMemMap(va, kGran, kGran, h));
  ASSERT_MUSA(musaMemSetAccess(va, kGran, 0));
  ExpectPattern(va, kGran, 0x05, kGran);
  ASSERT_MUSA(musaMemUnmap(va, kGran));
  ASSERT_MUSA(musaMemRelease(h));
  ASSERT_MUSA(musaMemAddressFree(va, 2 * kGran));
}

TEST_F(VmmTest, ReleaseWhileMappedDefersUntilUnmap) {
  size_t before = FreeBytes();
  void* va = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&va, kGran, 0));
  musaMemGenericAllocationHandle_t h = 0;
  ASSERT_MUSA(musaMemCreate(&h, kGran, 0));
  ASSERT_MUSA(musaMemMap(va, kGran, 0, h));
  ASSERT_MUSA(musaMemSetAccess(va, kGran, 0));
  Fill(va, kGran, 0x99);
  ASSERT_MUSA(musaMemRelease(h));
  EXPECT_EQ(FreeBytes(), before - kGran) << "released while still mapped: must stay charged";
  ExpectPattern(va, kGran, 0x99);  // the mapping still works
  EXPECT_EQ(musaMemRelease(h), musaErrorInvalidValue) << "double release accepted";
  void* other = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&other, kGran, 0));
  EXPECT_EQ(musaMemMap(other, kGran, 0, h), musaErrorInvalidValue) << "released handle mapped";
  ASSERT_MUSA(musaMemAddressFree(other, kGran));
  ASSERT_MUSA(musaMemUnmap(va, kGran));
  EXPECT_EQ(FreeBytes(), before) << "unmapping the last mapping of a released chunk frees it";
  ASSERT_MUSA(musaMemAddressFree(va, kGran));
}

TEST_F(VmmTest, CapacityIsSharedWithMalloc) {
  size_t before = FreeBytes();
  musaMemGenericAllocationHandle_t h = 0;
  ASSERT_MUSA(musaMemCreate(&h, 3 * kGran, 0));
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, kMiB));
  EXPECT_EQ(FreeBytes(), before - 3 * kGran - kMiB);
  // Creating more than what is left fails.
  musaMemGenericAllocationHandle_t big = 0;
  size_t left = FreeBytes();
  EXPECT_EQ(musaMemCreate(&big, (left / kGran + 1) * kGran, 0), musaErrorMemoryAllocation);
  ASSERT_MUSA(musaFree(d));
  ASSERT_MUSA(musaMemRelease(h));
  EXPECT_EQ(FreeBytes(), before);
}

TEST_F(VmmTest, MapErrors) {
  void* va = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&va, 4 * kGran, 0));
  musaMemGenericAllocationHandle_t h = 0, h2 = 0, big = 0;
  ASSERT_MUSA(musaMemCreate(&h, kGran, 0));
  ASSERT_MUSA(musaMemCreate(&h2, kGran, 0));
  ASSERT_MUSA(musaMemCreate(&big, 2 * kGran, 0));

  // Bad alignment of the address, size or offset.
  EXPECT_EQ(musaMemMap(Off(va, 4096), kGran, 0, h), musaErrorInvalidValue);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("aligned"), std::string::npos)
      << musaGetLastErrorMessage();
  EXPECT_EQ(musaMemMap(va, kGran / 2, 0, h), musaErrorInvalidValue);
  EXPECT_EQ(musaMemMap(va, kGran, 4096, big), musaErrorInvalidValue);
  // Larger than the physical chunk.
  EXPECT_EQ(musaMemMap(va, 2 * kGran, 0, h), musaErrorInvalidValue);
  EXPECT_EQ(musaMemMap(va, 2 * kGran, kGran, big), musaErrorInvalidValue);
  // Outside the reservation, or running past its end.
  EXPECT_EQ(musaMemMap(Off(va, 3 * kGran), 2 * kGran, 0, big), musaErrorInvalidValue);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("reserved"), std::string::npos)
      << musaGetLastErrorMessage();
  std::vector<uint8_t> heap(3 * kGran);
  void* unreserved = reinterpret_cast<void*>((Addr(heap.data()) + kGran - 1) / kGran * kGran);
  EXPECT_EQ(musaMemMap(unreserved, kGran, 0, h), musaErrorInvalidValue);
  // Unknown handle.
  EXPECT_EQ(musaMemMap(va, kGran, 0, 0xfeedface), musaErrorInvalidValue);

  // Overlap: same start, a mapping that would cover an existing one, and one
  // starting inside an existing one.
  ASSERT_MUSA(musaMemMap(Off(va, kGran), kGran, 0, h));
  EXPECT_EQ(musaMemMap(Off(va, kGran), kGran, 0, h2), musaErrorInvalidValue);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("overlaps"), std::string::npos)
      << musaGetLastErrorMessage();
  EXPECT_EQ(musaMemMap(va, 2 * kGran, 0, big), musaErrorInvalidValue);
  ASSERT_MUSA(musaMemMap(Off(va, 2 * kGran), 2 * kGran, 0, big));
  EXPECT_EQ(musaMemMap(Off(va, 3 * kGran), kGran, 0, h2), musaErrorInvalidValue);
  // A free slot next to the mappings still works.
  ASSERT_MUSA(musaMemMap(va, kGran, 0, h2));

  // Unmap must name a mapping exactly; the reservation cannot be freed while mapped.
  EXPECT_EQ(musaMemUnmap(Off(va, 2 * kGran), kGran), musaErrorInvalidValue);
  EXPECT_EQ(musaMemUnmap(Off(va, 3 * kGran), kGran), musaErrorInvalidValue);
  EXPECT_EQ(musaMemAddressFree(va, 4 * kGran), musaErrorInvalidValue);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("unmap"), std::string::npos)
      << musaGetLastErrorMessage();

  ASSERT_MUSA(musaMemUnmap(va, kGran));
  ASSERT_MUSA(musaMemUnmap(Off(va, kGran), kGran));
  ASSERT_MUSA(musaMemUnmap(Off(va, 2 * kGran), 2 * kGran));
  EXPECT_EQ(musaMemUnmap(va, kGran), musaErrorInvalidValue) << "double unmap accepted";
  ASSERT_MUSA(musaMemRelease(h));
  ASSERT_MUSA(musaMemRelease(h2));
  ASSERT_MUSA(musaMemRelease(big));
  ASSERT_MUSA(musaMemAddressFree(va, 4 * kGran));
}

TEST_F(VmmTest, SetAccessNeedsMappedRange) {
  void* va = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&va, 2 * kGran, 0));
  // Nothing mapped yet: access cannot be granted to bare address space.
  EXPECT_EQ(musaMemSetAccess(va, kGran, 0), musaErrorInvalidValue);
  musaMemGenericAllocationHandle_t h = 0;
  ASSERT_MUSA(musaMemCreate(&h, kGran, 0));
  ASSERT_MUSA(musaMemMap(va, kGran, 0, h));
  // Partly mapped range.
  EXPECT_EQ(musaMemSetAccess(va, 2 * kGran, 0), musaErrorInvalidValue);
  // Memory that does not belong to the runtime at all.
  std::vector<uint8_t> heap(8192);
  EXPECT_EQ(musaMemSetAccess(heap.data(), 4096, 0), musaErrorInvalidValue);
  // Invalid device.
  EXPECT_EQ(musaMemSetAccess(va, kGran, 2), musaErrorInvalidDevice);
  ASSERT_MUSA(musaMemSetAccess(va, kGran, 0));
  ASSERT_MUSA(musaMemUnmap(va, kGran));
  ASSERT_MUSA(musaMemRelease(h));
  ASSERT_MUSA(musaMemAddressFree(va, 2 * kGran));
}

TEST_F(VmmTest, ChunkOnSecondDevice) {
  ASSERT_MUSA(musaSetDevice(1));
  size_t before1 = FreeBytes();
  ASSERT_MUSA(musaSetDevice(0));
  size_t before0 = FreeBytes();
  void* va = nullptr;
  ASSERT_MUSA(musaMemAddressReserve(&va, kGran, 0));
  musaMemGenericAllocationHandle_t h = 0;
  ASSERT_MUSA(musaMemCreate(&h, kGran, 1));
  EXPECT_EQ(FreeBytes(), before0);
  ASSERT_MUSA(musaMemMap(va, kGran, 0, h));
  ASSERT_MUSA(musaMemSetAccess(va, kGran, 1));
  musaPointerAttributes a{};
  ASSERT_MUSA(musaPointerGetAttributes(&a, va));
  EXPECT_EQ(a.type, musaMemoryTypeDevice);
  EXPECT_EQ(a.device, 1);
  ASSERT_MUSA(musaSetDevice(1));
  EXPECT_EQ(FreeBytes(), before1 - kGran);
  ASSERT_MUSA(musaMemUnmap(va, kGran));
  ASSERT_MUSA(musaMemRelease(h));
  EXPECT_EQ(FreeBytes(), before1);
  ASSERT_MUSA(musaMemAddressFree(va, kGran));
}

}  // namespace
