// Environment-dependent behaviour. The runtime reads its environment once per
// process, so each ENV_TEST body runs in a fresh child process (this binary
// re-executed with the given variables); see test_support.h.
#include "test_support.h"
#include "driver.h"  // musa_rt::parseByteSize

#include <cstdlib>
#include <string>
#include <vector>

namespace {

std::string Name(int device) {
  musaDeviceProp p;
  EXPECT_MUSA(musaGetDeviceProperties(&p, device));
  return p.name;
}

int Count() {
  int n = -1;
  EXPECT_MUSA(musaGetDeviceCount(&n));
  return n;
}

// The harness itself: a child whose assertion fails must be reported as failing.
TEST(EnvHarness, ChildFailureIsDetected) {
  if (musa_test::IsChild()) {
    if (std::getenv("MUSA_RT_TEST_MAKE_FAIL")) ADD_FAILURE() << "deliberate failure in the child";
    return;
  }
  musa_test::ChildResult bad = musa_test::RunSelfAsChild({{"MUSA_RT_TEST_MAKE_FAIL", "1"}});
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("deliberate failure in the child"), std::string::npos) << bad.output;
  musa_test::ChildResult good = musa_test::RunSelfAsChild({});
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_NE(good.output.find("[  PASSED  ] 1 test."), std::string::npos) << good.output;
}

// The child sees exactly the environment it was given (and the host driver).
ENV_TEST(EnvHarness, ChildSeesItsEnvironment, {{"MUSA_RT_TEST_MARK", "yes"}}) {
  ASSERT_NE(std::getenv("MUSA_RT_TEST_MARK"), nullptr);
  EXPECT_STREQ(std::getenv("MUSA_RT_TEST_MARK"), "yes");
  EXPECT_STREQ(std::getenv("TORCH_MUSA_DRIVER"), "host");
  EXPECT_EQ(std::getenv("MUSA_VISIBLE_DEVICES"), nullptr);
  EXPECT_STREQ(musaGetDriverName(), "host");
  EXPECT_EQ(Count(), 2);
}

// ---- MUSA_VISIBLE_DEVICES ----

ENV_TEST(EnvVisibleDevices, OneRenumbersToZero, {{"MUSA_VISIBLE_DEVICES", "1"}}) {
  ASSERT_EQ(Count(), 1);
  musaDeviceProp p;
  ASSERT_MUSA(musaGetDeviceProperties(&p, 0));
  EXPECT_STREQ(p.name, "MUSA Host Emulated Device 1") << "logical 0 must be physical device 1";
  EXPECT_EQ(std::string(p.uuid).substr(24), "000000000001");
  EXPECT_EQ(musaSetDevice(1), musaErrorInvalidDevice);
  std::string msg = musaGetLastErrorMessage();
  EXPECT_NE(msg.find("1 MUSA device(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0..0"), std::string::npos) << msg;
  ASSERT_MUSA(musaSetDevice(0));
  // Pointers and streams report logical numbers.
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, 4096));
  musaPointerAttributes a{};
  ASSERT_MUSA(musaPointerGetAttributes(&a, d));
  EXPECT_EQ(a.type, musaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  ASSERT_MUSA(musaFree(d));
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  int dev = -1;
  ASSERT_MUSA(musaStreamGetDevice(s, &dev));
  EXPECT_EQ(dev, 0);
  ASSERT_MUSA(musaStreamDestroy(s));
  musaMemGenericAllocationHandle_t h = 0;
  ASSERT_MUSA(musaMemCreate(&h, 2 * kMiB, 0));
  ASSERT_MUSA(musaMemRelease(h));
}

ENV_TEST(EnvVisibleDevices, ReorderedList, {{"MUSA_VISIBLE_DEVICES", "1,0"}}) {
  ASSERT_EQ(Count(), 2);
  EXPECT_EQ(Name(0), "MUSA Host Emulated Device 1");
  EXPECT_EQ(Name(1), "MUSA Host Emulated Device 0");
  ASSERT_MUSA(musaSetDevice(1));  // physical 0
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, 4096));
  musaPointerAttributes a{};
  ASSERT_MUSA(musaPointerGetAttributes(&a, d));
  EXPECT_EQ(a.device, 1);
  ASSERT_MUSA(musaFree(d));
}

ENV_TEST(EnvVisibleDevices, ParsingStopsAtFirstInvalidEntry, {{"MUSA_VISIBLE_DEVICES", "1,7,0"}}) {
  ASSERT_EQ(Count(), 1);
  EXPECT_EQ(Name(0), "MUSA Host Emulated Device 1");
}

ENV_TEST(EnvVisibleDevices, DuplicateEndsTheList, {{"MUSA_VISIBLE_DEVICES", "0,0,1"}}) {
  EXPECT_EQ(Count(), 1);
}

ENV_TEST(EnvVisibleDevices, EmptyHidesEverything, {{"MUSA_VISIBLE_DEVICES", ""}}) {
  EXPECT_EQ(Count(), 0);
  EXPECT_EQ(musaSetDevice(0), musaErrorNoDevice);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("MUSA_VISIBLE_DEVICES"), std::string::npos)
      << musaGetLastErrorMessage();
  void* p = nullptr;
  EXPECT_EQ(musaMalloc(&p, 16), musaErrorNoDevice);
  musaStream_t s = nullptr;
  EXPECT_EQ(musaStreamCreate(&s), musaErrorNoDevice);
}

// ---- TORCH_MUSA_HOST_DEVICES ----

ENV_TEST(EnvHostDevices, ThreeDevices, {{"TORCH_MUSA_HOST_DEVICES", "3"}}) {
  ASSERT_EQ(Count(), 3);
  EXPECT_EQ(Name(2), "MUSA Host Emulated Device 2");
  ASSERT_MUSA(musaSetDevice(2));
  void* d = nullptr;
  ASSERT_MUSA(musaMalloc(&d, 4096));
  musaPointerAttributes a{};
  ASSERT_MUSA(musaPointerGetAttributes(&a, d));
  EXPECT_EQ(a.device, 2);
  ASSERT_MUSA(musaFree(d));
  EXPECT_EQ(musaSetDevice(3), musaErrorInvalidDevice);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("0..2"), std::string::npos)
      << musaGetLastErrorMessage();
}

ENV_TEST(EnvHostDevices, CombinedWithVisibleDevices,
         {{"TORCH_MUSA_HOST_DEVICES", "4"}, {"MUSA_VISIBLE_DEVICES", "3,1"}}) {
  ASSERT_EQ(Count(), 2);
  EXPECT_EQ(Name(0), "MUSA Host Emulated Device 3");
  EXPECT_EQ(Name(1), "MUSA Host Emulated Device 1");
}

void ExpectInitError(const char* variable) {
  int n = -1;
  EXPECT_EQ(musaGetDeviceCount(&n), musaErrorInitializationError);
  std::string msg = musaGetLastErrorMessage();
  EXPECT_NE(msg.find(variable), std::string::npos) << "message does not name " << variable << ": " << msg;
  // Every call that needs the driver fails the same way; nothing crashes.
  void* p = nullptr;
  EXPECT_EQ(musaMalloc(&p, 16), musaErrorInitializationError);
  EXPECT_EQ(musaSetDevice(0), musaErrorInitializationError);
  musaStream_t s = nullptr;
  EXPECT_EQ(musaStreamCreate(&s), musaErrorInitializationError);
  EXPECT_EQ(musaLaunchTask(nullptr, [] {}, "t"), musaErrorInitializationError);
  EXPECT_STREQ(musaGetDriverName(), "none");
}

ENV_TEST(EnvHostDevices, ZeroIsAnError, {{"TORCH_MUSA_HOST_DEVICES", "0"}}) {
  ExpectInitError("TORCH_MUSA_HOST_DEVICES");
}

ENV_TEST(EnvHostDevices, GarbageIsAnError, {{"TORCH_MUSA_HOST_DEVICES", "2x"}}) {
  ExpectInitError("TORCH_MUSA_HOST_DEVICES");
}

ENV_TEST(EnvHostDevices, TooManyIsAnError, {{"TORCH_MUSA_HOST_DEVICES", "65"}}) {
  ExpectInitError("TORCH_MUSA_HOST_DEVICES");
}

// ---- TORCH_MUSA_HOST_MEMORY ----

ENV_TEST(EnvHostMemory, SmallDeviceRefusesLargeMalloc, {{"TORCH_MUSA_HOST_MEMORY", "64MiB"}}) {
  size_t f = 0, t = 0;
  ASSERT_MUSA(musaMemGetInfo(&f, &t));
  EXPECT_EQ(t, 64 * kMiB);
  EXPECT_EQ(f, 64 * kMiB);
  musaDeviceProp p;
  ASSERT_MUSA(musaGetDeviceProperties(&p, 1));
  EXPECT_EQ(p.totalGlobalMem, 64 * kMiB) << "every device gets the capacity";

  void* d = nullptr;
  EXPECT_EQ(musaMalloc(&d, 100 * kMiB), musaErrorMemoryAllocation);
  std::string msg = musaGetLastErrorMessage();
  EXPECT_NE(msg.find("100.00 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("64.00 MiB free of 64.00 MiB"), std::string::npos) << msg;

  // Fill to the brim, fail by a little, and recover.
  void* a = nullptr;
  ASSERT_MUSA(musaMalloc(&a, 60 * kMiB));
  void* b = nullptr;
  EXPECT_EQ(musaMalloc(&b, 8 * kMiB), musaErrorMemoryAllocation);
  msg = musaGetLastErrorMessage();
  EXPECT_NE(msg.find("tried to allocate 8.00 MiB, 4.00 MiB free of 64.00 MiB"), std::string::npos) << msg;
  musaMemGenericAllocationHandle_t h = 0;
  EXPECT_EQ(musaMemCreate(&h, 6 * kMiB, 0), musaErrorMemoryAllocation) << "VMM ignores the capacity";
  ASSERT_MUSA(musaMalloc(&b, 4 * kMiB));  // exactly what is left
  ASSERT_MUSA(musaMemGetInfo(&f, &t));
  EXPECT_EQ(f, 0u);
  void* c = nullptr;
  EXPECT_EQ(musaMalloc(&c, 1), musaErrorMemoryAllocation);
  ASSERT_MUSA(musaFree(a));
  ASSERT_MUSA(musaFree(b));
  ASSERT_MUSA(musaMalloc(&a, 64 * kMiB));
  ASSERT_MUSA(musaMemset(a, 0x3, 64 * kMiB));
  unsigned char last = 0;
  ASSERT_MUSA(musaMemcpy(&last, static_cast<char*>(a) + 64 * kMiB - 1, 1, musaMemcpyDeviceToHost));
  EXPECT_EQ(last, 0x3);
  ASSERT_MUSA(musaFree(a));
}

ENV_TEST(EnvHostMemory, FractionalUnits, {{"TORCH_MUSA_HOST_MEMORY", "1.5GiB"}}) {
  size_t f = 0, t = 0;
  ASSERT_MUSA(musaMemGetInfo(&f, &t));
  EXPECT_EQ(t, 3 * kGiB / 2);
}

ENV_TEST(EnvHostMemory, NotASize, {{"TORCH_MUSA_HOST_MEMORY", "lots"}}) {
  ExpectInitError("TORCH_MUSA_HOST_MEMORY");
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("lots"), std::string::npos);
}

ENV_TEST(EnvHostMemory, UnknownUnit, {{"TORCH_MUSA_HOST_MEMORY", "12 parsecs"}}) {
  ExpectInitError("TORCH_MUSA_HOST_MEMORY");
}

ENV_TEST(EnvHostMemory, BelowGranularity, {{"TORCH_MUSA_HOST_MEMORY", "1MiB"}}) {
  ExpectInitError("TORCH_MUSA_HOST_MEMORY");
}

ENV_TEST(EnvHostMemory, Infinite, {{"TORCH_MUSA_HOST_MEMORY", "inf"}}) {
  ExpectInitError("TORCH_MUSA_HOST_MEMORY");
}

// ---- TORCH_MUSA_DRIVER ----

ENV_TEST(EnvDriver, BogusDriverIsAnInitializationError, {{"TORCH_MUSA_DRIVER", "bogus"}}) {
  ExpectInitError("TORCH_MUSA_DRIVER");
  std::string msg = musaGetLastErrorMessage();
  EXPECT_NE(msg.find("'bogus'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("auto, host, cuda"), std::string::npos) << msg;
  // Error reporting itself still works without a driver.
  EXPECT_STREQ(musaGetErrorName(musaErrorInitializationError), "musaErrorInitializationError");
  EXPECT_EQ(musaGetLastError(), musaErrorInitializationError);
}

ENV_TEST(EnvDriver, CudaWithoutPluginIsAnInitializationError,
         {{"TORCH_MUSA_DRIVER", "cuda"},
          {"TORCH_MUSA_CUDA_DRIVER_LIB", "/nonexistent/libmusa_cuda_driver.so"}}) {
  ExpectInitError("TORCH_MUSA_DRIVER=cuda");
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("TORCH_MUSA_DRIVER=host"), std::string::npos);
}

ENV_TEST(EnvDriver, AutoFallsBackToHost,
         {{"TORCH_MUSA_DRIVER", "auto"},
          {"TORCH_MUSA_CUDA_DRIVER_LIB", "/nonexistent/libmusa_cuda_driver.so"}}) {
  EXPECT_STREQ(musaGetDriverName(), "host");
  EXPECT_EQ(Count(), 2);
}

// ---- the size parser behind TORCH_MUSA_HOST_MEMORY ----

TEST(ParseByteSize, AcceptsUnits) {
  struct Case { const char* text; size_t want; };
  const Case cases[] = {{"4096", 4096},           {"16GiB", 16 * kGiB}, {"512MiB", 512 * kMiB},
                        {"512mb", 512 * kMiB},    {"1.5G", 3 * kGiB / 2}, {"2 GiB", 2 * kGiB},
                        {"8k", 8192},             {"1T", kGiB * 1024},  {"100b", 100},
                        {"0", 0}};
  for (const Case& c : cases) {
    size_t got = 12345;
    EXPECT_TRUE(musa_rt::parseByteSize(c.text, &got)) << c.text;
    EXPECT_EQ(got, c.want) << c.text;
  }
}

TEST(ParseByteSize, RejectsGarbage) {
  for (const char* text : {"", "GiB", "-1GiB", "12 parsecs", "1.5 GiBs", "inf", "nan", "1e30",
                           "1e300GiB", "abc"}) {
    size_t got = 777;
    EXPECT_FALSE(musa_rt::parseByteSize(text, &got)) << "accepted '" << text << "' as " << got;
  }
}

}  // namespace
