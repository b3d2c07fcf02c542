// Devices, driver selection, per-thread state and error reporting.
#include "test_support.h"

#include <cstring>
#include <set>
#include <string>
#include <thread>

namespace {

// Restores device 0 as current so tests do not leak state into each other
// when the whole binary runs in one process.
class DeviceTest : public ::testing::Test {
 protected:
  void TearDown() override { musaSetDevice(0); musaGetLastError(); }
};

TEST(Driver, HostDriverIsActive) {
  EXPECT_STREQ(musaGetDriverName(), "host");
  EXPECT_NE(std::string(musaGetBuiltDrivers()).find("host"), std::string::npos)
      << musaGetBuiltDrivers();
}

TEST_F(DeviceTest, DefaultCountIsTwo) {
  int count = -1;
  ASSERT_MUSA(musaGetDeviceCount(&count));
  EXPECT_EQ(count, 2);
}

TEST_F(DeviceTest, CountNullPointerIsInvalidValue) {
  EXPECT_EQ(musaGetDeviceCount(nullptr), musaErrorInvalidValue);
  EXPECT_EQ(musaGetDevice(nullptr), musaErrorInvalidValue);
}

TEST_F(DeviceTest, SetAndGetDevice) {
  int dev = -1;
  ASSERT_MUSA(musaGetDevice(&dev));
  EXPECT_EQ(dev, 0);
  ASSERT_MUSA(musaSetDevice(1));
  ASSERT_MUSA(musaGetDevice(&dev));
  EXPECT_EQ(dev, 1);
  ASSERT_MUSA(musaSetDevice(0));
  ASSERT_MUSA(musaGetDevice(&dev));
  EXPECT_EQ(dev, 0);
}

TEST_F(DeviceTest, CurrentDeviceIsPerThread) {
  ASSERT_MUSA(musaSetDevice(1));
  int other = -1;
  int other_after = -1;
  std::thread t([&] {
    musaGetDevice(&other);  // a new thread starts on device 0
    musaSetDevice(0);
    musaGetDevice(&other_after);
  });
  t.join();
  EXPECT_EQ(other, 0);
  EXPECT_EQ(other_after, 0);
  int mine = -1;
  ASSERT_MUSA(musaGetDevice(&mine));
  EXPECT_EQ(mine, 1) << "another thread's musaSetDevice changed this thread's device";
}

TEST_F(DeviceTest, Properties) {
  for (int d = 0; d < 2; ++d) {
    musaDeviceProp p;
    std::memset(&p, 0xab, sizeof p);
    ASSERT_MUSA(musaGetDeviceProperties(&p, d));
    EXPECT_EQ(std::string(p.name), "MUSA Host Emulated Device " + std::to_string(d));
    EXPECT_EQ(p.totalGlobalMem, 8 * kGiB);
    EXPECT_EQ(p.isHostEmulated, 1);
    EXPECT_EQ(p.major, 3);  // MUSA architecture 3.1 (mp_31), the first with FP8
    EXPECT_EQ(p.minor, 1);
    EXPECT_EQ(p.warpSize, 32);
    EXPECT_EQ(p.maxThreadsPerBlock, 1024);
    EXPECT_GE(p.multiProcessorCount, 1);
    EXPECT_GT(p.l2CacheSize, 0u);
    EXPECT_EQ(std::strlen(p.uuid), 36u);
    EXPECT_EQ(p.integrated, 1);  // host memory is the device's
    EXPECT_EQ(p.pciBusID, d);
    EXPECT_GE(p.sharedMemPerBlockOptin, p.sharedMemPerBlock);
    EXPECT_GE(p.maxThreadsPerMultiProcessor, p.maxThreadsPerBlock);
    EXPECT_GT(p.regsPerMultiprocessor, 0);
    EXPECT_GT(p.clockRate, 0);
  }
  musaDeviceProp a, b;
  ASSERT_MUSA(musaGetDeviceProperties(&a, 0));
  ASSERT_MUSA(musaGetDeviceProperties(&b, 1));
  EXPECT_STRNE(a.uuid, b.uuid);
  EXPECT_EQ(musaGetDeviceProperties(nullptr, 0), musaErrorInvalidValue);
}

TEST_F(DeviceTest, TotalMemoryMatchesMemGetInfo) {
  musaDeviceProp p;
  ASSERT_MUSA(musaGetDeviceProperties(&p, 0));
  size_t free_b = 0, total = 0;
  ASSERT_MUSA(musaMemGetInfo(&free_b, &total));
  EXPECT_EQ(total, p.totalGlobalMem);
  EXPECT_LE(free_b, total);
}

void ExpectInvalidDevice(musaError_t err, int index) {
  EXPECT_EQ(err, musaErrorInvalidDevice);
  std::string msg = musaGetLastErrorMessage();
  EXPECT_NE(msg.find("invalid device ordinal " + std::to_string(index)), std::string::npos) << msg;
  EXPECT_NE(msg.find("0..1"), std::string::npos) << "message does not name the valid range: " << msg;
  EXPECT_NE(msg.find("2 MUSA device(s)"), std::string::npos) << msg;
}

TEST_F(DeviceTest, InvalidDeviceIndex) {
  ExpectInvalidDevice(musaSetDevice(2), 2);
  ExpectInvalidDevice(musaSetDevice(-1), -1);
  int dev = -1;
  ASSERT_MUSA(musaGetDevice(&dev));
  EXPECT_EQ(dev, 0) << "a failed musaSetDevice changed the current device";

  musaDeviceProp p;
  ExpectInvalidDevice(musaGetDeviceProperties(&p, 5), 5);
  size_t g = 0;
  ExpectInvalidDevice(musaMemGetAllocationGranularity(&g, 7), 7);
  musaStream_t s = nullptr;
  ExpectInvalidDevice(musaGetDefaultStream(3, &s), 3);
  int init = 0;
  ExpectInvalidDevice(musaDeviceIsInitialized(64, &init), 64);
  musaMemGenericAllocationHandle_t h = 0;
  ExpectInvalidDevice(musaMemCreate(&h, 2 * kMiB, 2), 2);
}

TEST_F(DeviceTest, LastErrorIsStickyUntilRead) {
  musaGetLastError();  // clear
  EXPECT_EQ(musaPeekAtLastError(), musaSuccess);
  EXPECT_EQ(musaSetDevice(9), musaErrorInvalidDevice);
  ASSERT_MUSA(musaSetDevice(0));  // success does not clear the last error
  EXPECT_EQ(musaPeekAtLastError(), musaErrorInvalidDevice);
  EXPECT_EQ(musaPeekAtLastError(), musaErrorInvalidDevice);  // peek does not clear
  EXPECT_EQ(musaGetLastError(), musaErrorInvalidDevice);
  EXPECT_EQ(musaGetLastError(), musaSuccess);  // get clears
}

TEST_F(DeviceTest, LastErrorIsPerThread) {
  musaGetLastError();
  musaError_t seen_in_thread = musaSuccess;
  std::string msg_in_thread;
  std::thread t([&] {
    musaSetDevice(42);
    seen_in_thread = musaGetLastError();
    msg_in_thread = musaGetLastErrorMessage();
  });
  t.join();
  EXPECT_EQ(seen_in_thread, musaErrorInvalidDevice);
  EXPECT_NE(msg_in_thread.find("42"), std::string::npos) << msg_in_thread;
  EXPECT_EQ(musaGetLastError(), musaSuccess) << "another thread's error leaked into this thread";
}

TEST_F(DeviceTest, DeviceIsInitializedAfterUse) {
  ASSERT_MUSA(musaSetDevice(1));
  int init = 0;
  ASSERT_MUSA(musaDeviceIsInitialized(1, &init));
  EXPECT_EQ(init, 1);
}

TEST_F(DeviceTest, DeviceSynchronize) {
  EXPECT_MUSA(musaDeviceSynchronize());
  ASSERT_MUSA(musaSetDevice(1));
  EXPECT_MUSA(musaDeviceSynchronize());
}

TEST_F(DeviceTest, StreamPriorityRange) {
  int least = 99, greatest = 99;
  ASSERT_MUSA(musaDeviceGetStreamPriorityRange(&least, &greatest));
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -2);
  EXPECT_MUSA(musaDeviceGetStreamPriorityRange(nullptr, nullptr));
}

// ---- error names and strings ----

const musaError_t kAllErrors[] = {
    musaSuccess, musaErrorInvalidValue, musaErrorMemoryAllocation, musaErrorInitializationError,
    musaErrorInvalidDevice, musaErrorNoDevice, musaErrorInvalidResourceHandle, musaErrorNotReady,
    musaErrorNotSupported, musaErrorStreamCaptureUnsupported, musaErrorStreamCaptureInvalidated,
    musaErrorStreamCaptureUnmatched, musaErrorStreamCaptureImplicit, musaErrorCapturedEvent,
    musaErrorUnknown};

TEST(Errors, NamesMatchEnumerators) {
  EXPECT_STREQ(musaGetErrorName(musaSuccess), "musaSuccess");
  EXPECT_STREQ(musaGetErrorName(musaErrorInvalidValue), "musaErrorInvalidValue");
  EXPECT_STREQ(musaGetErrorName(musaErrorMemoryAllocation), "musaErrorMemoryAllocation");
  EXPECT_STREQ(musaGetErrorName(musaErrorInvalidDevice), "musaErrorInvalidDevice");
  EXPECT_STREQ(musaGetErrorName(musaErrorStreamCaptureUnsupported),
               "musaErrorStreamCaptureUnsupported");
  EXPECT_STREQ(musaGetErrorName(musaErrorStreamCaptureInvalidated),
               "musaErrorStreamCaptureInvalidated");
  EXPECT_STREQ(musaGetErrorName(musaErrorCapturedEvent), "musaErrorCapturedEvent");
  EXPECT_STREQ(musaGetErrorName(musaErrorUnknown), "musaErrorUnknown");
}

TEST(Errors, EveryCodeHasADistinctNameAndString) {
  std::set<std::string> names, strings;
  for (musaError_t e : kAllErrors) {
    std::string n = musaGetErrorName(e), s = musaGetErrorString(e);
    EXPECT_EQ(n.rfind("musa", 0), 0u) << n;
    EXPECT_NE(n, "musaErrorUnrecognized") << "code " << int(e) << " has no name";
    EXPECT_NE(s, "unrecognized error code") << "code " << int(e) << " has no string";
    EXPECT_FALSE(s.empty());
    names.insert(n);
    strings.insert(s);
  }
  EXPECT_EQ(names.size(), std::size(kAllErrors));
  EXPECT_EQ(strings.size(), std::size(kAllErrors));
}

TEST(Errors, Strings) {
  EXPECT_STREQ(musaGetErrorString(musaSuccess), "no error");
  EXPECT_STREQ(musaGetErrorString(musaErrorMemoryAllocation), "out of memory");
  EXPECT_STREQ(musaGetErrorString(musaErrorInvalidDevice), "invalid device ordinal");
  EXPECT_STREQ(musaGetErrorString(musaErrorInvalidValue), "invalid argument");
}

TEST(Errors, UnknownCode) {
  auto bogus = static_cast<musaError_t>(12345);
  EXPECT_STREQ(musaGetErrorName(bogus), "musaErrorUnrecognized");
  EXPECT_STREQ(musaGetErrorString(bogus), "unrecognized error code");
}

TEST(Errors, FailingCallSetsDetailedMessage) {
  void* p = nullptr;
  EXPECT_EQ(musaMalloc(nullptr, 16), musaErrorInvalidValue);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("musaMalloc"), std::string::npos)
      << musaGetLastErrorMessage();
  (void)p;
  musaGetLastError();
}

}  // namespace
