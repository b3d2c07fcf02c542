// Streams (priorities, query, synchronize, waits, task launch order) and events
// (record, query, timing).
#include "test_support.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

class StreamTest : public ::testing::Test {
 protected:
  void TearDown() override { musaSetDevice(0); musaGetLastError(); }
};
class EventTest : public StreamTest {};

TEST_F(StreamTest, CreateQuerySynchronizeDestroy) {
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(musaStreamQuery(s), musaSuccess);
  EXPECT_MUSA(musaStreamSynchronize(s));
  int prio = 99;
  ASSERT_MUSA(musaStreamGetPriority(s, &prio));
  EXPECT_EQ(prio, 0);
  int dev = -1;
  ASSERT_MUSA(musaStreamGetDevice(s, &dev));
  EXPECT_EQ(dev, 0);
  void* native = reinterpret_cast<void*>(0x1);
  ASSERT_MUSA(musaStreamGetNativeHandle(s, &native));
  EXPECT_EQ(native, nullptr) << "the host driver has no native stream handle";
  ASSERT_MUSA(musaStreamDestroy(s));
  EXPECT_EQ(musaStreamCreate(nullptr), musaErrorInvalidValue);
}

TEST_F(StreamTest, ValidateKnowsLiveStreamsOnly) {
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  EXPECT_EQ(musaStreamValidate(s), musaSuccess);
  EXPECT_EQ(musaStreamValidate(nullptr), musaSuccess) << "null is the default stream";
  musaStream_t def = nullptr;
  ASSERT_MUSA(musaGetDefaultStream(0, &def));
  EXPECT_EQ(musaStreamValidate(def), musaSuccess);
  int not_a_stream = 0;
  EXPECT_EQ(musaStreamValidate(reinterpret_cast<musaStream_t>(&not_a_stream)), musaErrorInvalidResourceHandle);
  ASSERT_MUSA(musaStreamDestroy(s));
  EXPECT_EQ(musaStreamValidate(s), musaErrorInvalidResourceHandle) << "destroyed";
}

TEST_F(StreamTest, HostDriverHasNoNativeStreamsToWrap) {
  musaStream_t s = nullptr;
  int native = 0;
  EXPECT_EQ(musaStreamCreateFromNative(&s, &native), musaErrorNotSupported);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("musaStreamCreate"), std::string::npos);
  EXPECT_EQ(musaStreamCreateFromNative(&s, nullptr), musaErrorInvalidValue);
  EXPECT_EQ(musaStreamCreateFromNative(nullptr, &native), musaErrorInvalidValue);
}

TEST_F(StreamTest, PriorityIsClampedToRange) {
  int least = 0, greatest = 0;
  ASSERT_MUSA(musaDeviceGetStreamPriorityRange(&least, &greatest));
  ASSERT_LE(greatest, least) << "greater priority is numerically lower, like CUDA";
  struct Case { int asked, want; };
  const Case cases[] = {{least, least},         {greatest, greatest}, {least + 5, least},
                        {greatest - 7, greatest}, {-1000000, greatest}, {1000000, least},
                        {(least + greatest) / 2, (least + greatest) / 2}};
  for (const Case& c : cases) {
    musaStream_t s = nullptr;
    ASSERT_MUSA(musaStreamCreateWithPriority(&s, musaStreamNonBlocking, c.asked));
    int got = 12345;
    ASSERT_MUSA(musaStreamGetPriority(s, &got));
    EXPECT_EQ(got, c.want) << "asked for priority " << c.asked;
    ASSERT_MUSA(musaStreamDestroy(s));
  }
}

TEST_F(StreamTest, StreamBelongsToCurrentDevice) {
  ASSERT_MUSA(musaSetDevice(1));
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  ASSERT_MUSA(musaSetDevice(0));
  int dev = -1;
  ASSERT_MUSA(musaStreamGetDevice(s, &dev));
  EXPECT_EQ(dev, 1);
  ASSERT_MUSA(musaStreamDestroy(s));
}

TEST_F(StreamTest, DefaultStreams) {
  musaStream_t d0 = nullptr, d0again = nullptr, d1 = nullptr;
  ASSERT_MUSA(musaGetDefaultStream(0, &d0));
  ASSERT_MUSA(musaGetDefaultStream(0, &d0again));
  ASSERT_MUSA(musaGetDefaultStream(1, &d1));
  ASSERT_NE(d0, nullptr);
  EXPECT_EQ(d0, d0again) << "the default stream must be one object per device";
  EXPECT_NE(d0, d1);
  int dev = -1;
  ASSERT_MUSA(musaStreamGetDevice(d1, &dev));
  EXPECT_EQ(dev, 1);
  // A null stream means the current device's default stream.
  ASSERT_MUSA(musaSetDevice(1));
  ASSERT_MUSA(musaStreamGetDevice(nullptr, &dev));
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(musaStreamQuery(nullptr), musaSuccess);
  EXPECT_MUSA(musaStreamSynchronize(nullptr));
  // Default streams cannot be destroyed.
  EXPECT_EQ(musaStreamDestroy(nullptr), musaErrorInvalidResourceHandle);
  EXPECT_EQ(musaStreamDestroy(d0), musaErrorInvalidResourceHandle);
  EXPECT_EQ(musaStreamQuery(d0), musaSuccess) << "default stream damaged by the destroy attempt";
}

TEST_F(StreamTest, TasksRunInLaunchOrder) {
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  std::vector<int> order;
  for (int i = 0; i < 100; ++i)
    ASSERT_MUSA(musaLaunchTask(s, [&order, i] { order.push_back(i); }, "append"));
  ASSERT_MUSA(musaStreamSynchronize(s));
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  ASSERT_MUSA(musaStreamDestroy(s));
}

TEST_F(StreamTest, TasksAndCopiesAreOrdered) {
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  int* d = nullptr;
  ASSERT_MUSA(musaMalloc(reinterpret_cast<void**>(&d), 4 * sizeof(int)));
  int host[4] = {0, 0, 0, 0};
  const int src[4] = {1, 2, 3, 4};
  ASSERT_MUSA(musaMemcpyAsync(d, src, sizeof src, musaMemcpyHostToDevice, s));
  ASSERT_MUSA(musaLaunchTask(s, [d] { for (int i = 0; i < 4; ++i) d[i] *= 10; }, "scale"));
  ASSERT_MUSA(musaMemcpyAsync(host, d, sizeof host, musaMemcpyDeviceToHost, s));
  ASSERT_MUSA(musaLaunchTask(s, [d] { d[0] = -1; }, "clobber"));  // after the copy-out
  ASSERT_MUSA(musaStreamSynchronize(s));
  EXPECT_EQ(host[0], 10);
  EXPECT_EQ(host[1], 20);
  EXPECT_EQ(host[2], 30);
  EXPECT_EQ(host[3], 40);
  int first = 0;
  ASSERT_MUSA(musaMemcpy(&first, d, sizeof first, musaMemcpyDeviceToHost));
  EXPECT_EQ(first, -1);
  ASSERT_MUSA(musaFree(d));
  ASSERT_MUSA(musaStreamDestroy(s));
}

TEST_F(StreamTest, LaunchTaskOnDefaultStreamAndNullName) {
  int ran = 0;
  ASSERT_MUSA(musaLaunchTask(nullptr, [&ran] { ++ran; }, nullptr));
  ASSERT_MUSA(musaStreamSynchronize(nullptr));
  EXPECT_EQ(ran, 1);
}

void AddSeven(void* user) { *static_cast<int*>(user) += 7; }

TEST_F(StreamTest, LaunchHostFunc) {
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  int value = 1;
  ASSERT_MUSA(musaLaunchHostFunc(s, AddSeven, &value));
  ASSERT_MUSA(musaLaunchTask(s, [&value] { value *= 2; }, "double"));
  ASSERT_MUSA(musaLaunchHostFunc(s, AddSeven, &value));
  ASSERT_MUSA(musaStreamSynchronize(s));
  EXPECT_EQ(value, (1 + 7) * 2 + 7) << "host functions ran out of order or not at all";
  EXPECT_EQ(musaLaunchHostFunc(s, nullptr, &value), musaErrorInvalidValue);
  ASSERT_MUSA(musaStreamDestroy(s));
}

TEST_F(StreamTest, WaitEventOrdersStreams) {
  musaStream_t producer = nullptr, consumer = nullptr;
  ASSERT_MUSA(musaStreamCreate(&producer));
  ASSERT_MUSA(musaStreamCreate(&consumer));
  musaEvent_t ev = nullptr;
  ASSERT_MUSA(musaEventCreateWithFlags(&ev, musaEventDisableTiming));
  std::atomic<int> value{0};
  int seen = -1;
  ASSERT_MUSA(musaLaunchTask(producer, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    value = 42;
  }, "produce"));
  ASSERT_MUSA(musaEventRecord(ev, producer));
  ASSERT_MUSA(musaStreamWaitEvent(consumer, ev, 0));
  ASSERT_MUSA(musaLaunchTask(consumer, [&] { seen = value.load(); }, "consume"));
  ASSERT_MUSA(musaStreamSynchronize(consumer));
  EXPECT_EQ(seen, 42);
  EXPECT_EQ(musaStreamWaitEvent(consumer, nullptr, 0), musaErrorInvalidResourceHandle);
  ASSERT_MUSA(musaEventDestroy(ev));
  ASSERT_MUSA(musaStreamDestroy(producer));
  ASSERT_MUSA(musaStreamDestroy(consumer));
}

// ---- events ----

TEST_F(EventTest, RecordQuerySynchronize) {
  musaEvent_t e = nullptr;
  ASSERT_MUSA(musaEventCreate(&e));
  ASSERT_NE(e, nullptr);
  ASSERT_MUSA(musaEventRecord(e, nullptr));
  EXPECT_EQ(musaEventQuery(e), musaSuccess);
  EXPECT_MUSA(musaEventSynchronize(e));
  ASSERT_MUSA(musaEventDestroy(e));
  EXPECT_EQ(musaEventCreate(nullptr), musaErrorInvalidValue);
  EXPECT_EQ(musaEventRecord(nullptr, nullptr), musaErrorInvalidResourceHandle);
  EXPECT_EQ(musaEventQuery(nullptr), musaErrorInvalidResourceHandle);
  EXPECT_EQ(musaEventSynchronize(nullptr), musaErrorInvalidResourceHandle);
  EXPECT_EQ(musaEventDestroy(nullptr), musaErrorInvalidResourceHandle);
}

TEST_F(EventTest, ElapsedTimeMeasuresASleepInATask) {
  musaStream_t s = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  musaEvent_t start = nullptr, end = nullptr;
  ASSERT_MUSA(musaEventCreate(&start));
  ASSERT_MUSA(musaEventCreateWithFlags(&end, musaEventBlockingSync));
  ASSERT_MUSA(musaEventRecord(start, s));
  ASSERT_MUSA(musaLaunchTask(s, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }, "sleep"));
  ASSERT_MUSA(musaEventRecord(end, s));
  ASSERT_MUSA(musaEventSynchronize(end));
  float ms = -1;
  ASSERT_MUSA(musaEventElapsedTime(&ms, start, end));
  EXPECT_GE(ms, 39.5f) << "the 40ms sleep inside the task was not measured";
  EXPECT_LT(ms, 10000.0f);
  // Back to back records: non-negative and small.
  ASSERT_MUSA(musaEventRecord(start, s));
  ASSERT_MUSA(musaEventRecord(end, s));
  ASSERT_MUSA(musaEventElapsedTime(&ms, start, end));
  EXPECT_GE(ms, 0.0f);
  EXPECT_LT(ms, 39.5f);
  // An event against itself.
  ASSERT_MUSA(musaEventElapsedTime(&ms, end, end));
  EXPECT_EQ(ms, 0.0f);
  EXPECT_EQ(musaEventElapsedTime(nullptr, start, end), musaErrorInvalidValue);
  EXPECT_EQ(musaEventElapsedTime(&ms, nullptr, end), musaErrorInvalidValue);
  ASSERT_MUSA(musaEventDestroy(start));
  ASSERT_MUSA(musaEventDestroy(end));
  ASSERT_MUSA(musaStreamDestroy(s));
}

TEST_F(EventTest, ElapsedTimeNeedsTiming) {
  musaEvent_t timed = nullptr, untimed = nullptr, untimed2 = nullptr;
  ASSERT_MUSA(musaEventCreate(&timed));
  ASSERT_MUSA(musaEventCreateWithFlags(&untimed, musaEventDisableTiming));
  ASSERT_MUSA(musaEventCreateWithFlags(&untimed2, musaEventDisableTiming | musaEventBlockingSync));
  ASSERT_MUSA(musaEventRecord(timed, nullptr));
  ASSERT_MUSA(musaEventRecord(untimed, nullptr));
  ASSERT_MUSA(musaEventRecord(untimed2, nullptr));
  EXPECT_EQ(musaEventQuery(untimed), musaSuccess);
  float ms = 0;
  EXPECT_EQ(musaEventElapsedTime(&ms, untimed, untimed2), musaErrorInvalidResourceHandle);
  std::string msg = musaGetLastErrorMessage();
  EXPECT_NE(msg.find("timing"), std::string::npos) << msg;
  EXPECT_EQ(musaEventElapsedTime(&ms, timed, untimed), musaErrorInvalidResourceHandle);
  EXPECT_EQ(musaEventElapsedTime(&ms, untimed, timed), musaErrorInvalidResourceHandle);
  ASSERT_MUSA(musaEventDestroy(timed));
  ASSERT_MUSA(musaEventDestroy(untimed));
  ASSERT_MUSA(musaEventDestroy(untimed2));
}

TEST_F(EventTest, ElapsedTimeNeedsRecordedEvents) {
  musaEvent_t a = nullptr, b = nullptr;
  ASSERT_MUSA(musaEventCreate(&a));
  ASSERT_MUSA(musaEventCreate(&b));
  float ms = 0;
  EXPECT_EQ(musaEventElapsedTime(&ms, a, b), musaErrorInvalidResourceHandle);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("recorded"), std::string::npos)
      << musaGetLastErrorMessage();
  ASSERT_MUSA(musaEventRecord(a, nullptr));
  EXPECT_EQ(musaEventElapsedTime(&ms, a, b), musaErrorInvalidResourceHandle);
  ASSERT_MUSA(musaEventRecord(b, nullptr));
  EXPECT_MUSA(musaEventElapsedTime(&ms, a, b));
  ASSERT_MUSA(musaEventDestroy(a));
  ASSERT_MUSA(musaEventDestroy(b));
}

TEST_F(EventTest, RecordOnAnotherDevicesStreamFails) {
  musaEvent_t e = nullptr;
  ASSERT_MUSA(musaEventCreate(&e));  // device 0
  ASSERT_MUSA(musaSetDevice(1));
  musaStream_t s1 = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s1));
  EXPECT_EQ(musaEventRecord(e, s1), musaErrorInvalidResourceHandle);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("different devices"), std::string::npos)
      << musaGetLastErrorMessage();
  EXPECT_EQ(musaEventRecord(e, nullptr), musaErrorInvalidResourceHandle)
      << "null stream is device 1's default stream here";
  ASSERT_MUSA(musaSetDevice(0));
  EXPECT_MUSA(musaEventRecord(e, nullptr));
  ASSERT_MUSA(musaStreamDestroy(s1));
  ASSERT_MUSA(musaEventDestroy(e));
}

TEST_F(EventTest, ElapsedTimeNeedsEventsOfOneDevice) {
  musaEvent_t a = nullptr, b = nullptr;
  ASSERT_MUSA(musaEventCreate(&a));  // device 0
  ASSERT_MUSA(musaEventRecord(a, nullptr));
  ASSERT_MUSA(musaSetDevice(1));
  ASSERT_MUSA(musaEventCreate(&b));
  ASSERT_MUSA(musaEventRecord(b, nullptr));
  float ms = 0;
  EXPECT_EQ(musaEventElapsedTime(&ms, a, b), musaErrorInvalidResourceHandle);  // as CUDA
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("same device"), std::string::npos)
      << musaGetLastErrorMessage();
  ASSERT_MUSA(musaEventDestroy(a));
  ASSERT_MUSA(musaEventDestroy(b));
}

// A spin holds the stream busy without blocking the caller; everything ordered after it waits.
TEST_F(StreamTest, SpinHoldsTheStreamAndWhatWaitsOnIt) {
  if (std::string(musaGetDriverName()) != "host") GTEST_SKIP() << "the host driver's spin";
  musaStream_t s = nullptr, other = nullptr;
  ASSERT_MUSA(musaStreamCreate(&s));
  ASSERT_MUSA(musaStreamCreate(&other));
  musaEvent_t start = nullptr, end = nullptr;
  ASSERT_MUSA(musaEventCreate(&start));
  ASSERT_MUSA(musaEventCreate(&end));
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_MUSA(musaEventRecord(start, s));
  ASSERT_MUSA(musaStreamSpin(s, 60000000ull));  // 60 ms at the 1 GHz clock
  int ran = 0;
  ASSERT_MUSA(musaLaunchTask(s, [&] { ran = 1; }, "after"));  // still runs inline
  ASSERT_MUSA(musaEventRecord(end, s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(30));
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(musaStreamQuery(s), musaErrorNotReady);
  EXPECT_EQ(musaEventQuery(end), musaErrorNotReady);
  EXPECT_EQ(musaEventQuery(start), musaSuccess);
  EXPECT_EQ(musaGetLastError(), musaSuccess) << "not-ready answers are not errors";
  ASSERT_MUSA(musaStreamWaitEvent(other, end, 0));
  EXPECT_EQ(musaStreamQuery(other), musaErrorNotReady);
  ASSERT_MUSA(musaDeviceSynchronize());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(59));
  EXPECT_EQ(musaStreamQuery(s), musaSuccess);
  EXPECT_EQ(musaStreamQuery(other), musaSuccess);
  float ms = 0;
  ASSERT_MUSA(musaEventElapsedTime(&ms, start, end));
  EXPECT_GE(ms, 59.0f);
  ASSERT_MUSA(musaStreamSpin(s, 20000000ull));
  ASSERT_MUSA(musaStreamSynchronize(s));
  EXPECT_EQ(musaStreamQuery(s), musaSuccess);
  ASSERT_MUSA(musaEventDestroy(start));
  ASSERT_MUSA(musaEventDestroy(end));
  ASSERT_MUSA(musaStreamDestroy(s));
  ASSERT_MUSA(musaStreamDestroy(other));
}

}  // namespace
