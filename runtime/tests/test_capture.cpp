// Stream capture into graphs, and graph replay.
#include "test_support.h"

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <cstdint>
#include <vector>

namespace {

class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_MUSA(musaStreamCreate(&s_)); }
  void TearDown() override {
    musaStreamCaptureStatus st = musaStreamCaptureStatusNone;
    if (musaStreamIsCapturing(s_, &st) == musaSuccess && st != musaStreamCaptureStatusNone) {
      musaGraph_t g = nullptr;
      musaStreamEndCapture(s_, &g);
      musaGraphDestroy(g);
    }
    musaStreamDestroy(s_);
    musaSetDevice(0);
    musaGetLastError();
  }
  musaStreamCaptureStatus Status(musaStream_t s) {
    musaStreamCaptureStatus st = static_cast<musaStreamCaptureStatus>(-1);
    EXPECT_MUSA(musaStreamIsCapturing(s, &st));
    return st;
  }
  musaStream_t s_ = nullptr;
};

TEST_F(CaptureTest, TasksAreRecordedNotRunAndReplayInOrder) {
  uint8_t* d = nullptr;
  ASSERT_MUSA(musaMalloc(reinterpret_cast<void**>(&d), 64));
  ASSERT_MUSA(musaMemset(d, 0, 64));
  std::vector<int> order;

  EXPECT_EQ(Status(s_), musaStreamCaptureStatusNone);
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  EXPECT_EQ(Status(s_), musaStreamCaptureStatusActive);
  ASSERT_MUSA(musaLaunchTask(s_, [&order] { order.push_back(1); }, "one"));
  ASSERT_MUSA(musaMemsetAsync(d, 0x42, 32, s_));
  ASSERT_MUSA(musaLaunchTask(s_, [&order, d] { order.push_back(d[0] == 0x42 ? 2 : -2); }, "two"));
  ASSERT_MUSA(musaLaunchTask(s_, [&order] { order.push_back(3); }, "three"));
  EXPECT_TRUE(order.empty()) << "captured tasks ran during capture";
  EXPECT_EQ(d[0], 0) << "a captured memset ran during capture";

  musaGraph_t graph = nullptr;
  ASSERT_MUSA(musaStreamEndCapture(s_, &graph));
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(Status(s_), musaStreamCaptureStatusNone);
  size_t nodes = 0;
  ASSERT_MUSA(musaGraphGetNodeCount(graph, &nodes));
  EXPECT_EQ(nodes, 4u);

  musaGraphExec_t exec = nullptr;
  ASSERT_MUSA(musaGraphInstantiate(&exec, graph));
  ASSERT_NE(exec, nullptr);
  EXPECT_TRUE(order.empty()) << "instantiation ran the graph";
  EXPECT_EQ(d[0], 0);

  ASSERT_MUSA(musaGraphLaunch(exec, s_));
  ASSERT_MUSA(musaStreamSynchronize(s_));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(d[0], 0x42);
  EXPECT_EQ(d[31], 0x42);
  EXPECT_EQ(d[32], 0);

  // A second launch runs everything again.
  ASSERT_MUSA(musaMemset(d, 0, 64));
  ASSERT_MUSA(musaGraphLaunch(exec, s_));
  ASSERT_MUSA(musaStreamSynchronize(s_));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(d[0], 0x42);

  ASSERT_MUSA(musaGraphExecDestroy(exec));
  ASSERT_MUSA(musaGraphDestroy(graph));
  ASSERT_MUSA(musaFree(d));
}

TEST_F(CaptureTest, AnyCapturingSaysWhetherSomeStreamCaptures) {
  // Per-op checks skip the stream's own query on it: it must never say 0 while a stream captures.
  auto any = [] {
    int a = -1;
    EXPECT_MUSA(musaStreamAnyCapturing(&a));
    return a;
  };
  EXPECT_EQ(any(), 0);
  musaStream_t other = nullptr;
  ASSERT_MUSA(musaStreamCreate(&other));
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  EXPECT_EQ(any(), 1);
  ASSERT_MUSA(musaStreamBeginCapture(other));
  musaGraph_t g = nullptr;
  ASSERT_MUSA(musaStreamEndCapture(s_, &g));
  musaGraphDestroy(g);
  EXPECT_EQ(any(), 1) << "the other stream still captures";
  ASSERT_MUSA(musaStreamInvalidateCapture(other, "a test"));
  EXPECT_EQ(musaStreamEndCapture(other, &g), musaErrorStreamCaptureInvalidated);  // ends it all the same
  musaGetLastError();
  EXPECT_EQ(any(), 0);
  EXPECT_EQ(musaStreamAnyCapturing(nullptr), musaErrorInvalidValue);
  musaGetLastError();
  ASSERT_MUSA(musaStreamDestroy(other));
}

TEST_F(CaptureTest, ExecOutlivesGraphAndRunsOnOtherStreams) {
  int count = 0;
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaLaunchTask(s_, [&count] { ++count; }, "inc"));
  musaGraph_t graph = nullptr;
  ASSERT_MUSA(musaStreamEndCapture(s_, &graph));
  musaGraphExec_t exec = nullptr;
  ASSERT_MUSA(musaGraphInstantiate(&exec, graph));
  ASSERT_MUSA(musaGraphDestroy(graph));
  ASSERT_MUSA(musaGraphLaunch(exec, nullptr));  // the default stream
  musaStream_t other = nullptr;
  ASSERT_MUSA(musaStreamCreate(&other));
  ASSERT_MUSA(musaGraphLaunch(exec, other));
  ASSERT_MUSA(musaStreamSynchronize(other));
  ASSERT_MUSA(musaStreamSynchronize(nullptr));
  EXPECT_EQ(count, 2);
  ASSERT_MUSA(musaStreamDestroy(other));
  ASSERT_MUSA(musaGraphExecDestroy(exec));
}

TEST_F(CaptureTest, CopiesAndHostFuncsAreCaptured) {
  std::vector<int> src{1, 2, 3, 4};
  std::vector<int> dst(4, 0);
  int* d = nullptr;
  ASSERT_MUSA(musaMalloc(reinterpret_cast<void**>(&d), 4 * sizeof(int)));
  int calls = 0;
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaMemcpyAsync(d, src.data(), 4 * sizeof(int), musaMemcpyHostToDevice, s_));
  ASSERT_MUSA(musaLaunchHostFunc(s_, [](void* u) { ++*static_cast<int*>(u); }, &calls));
  ASSERT_MUSA(musaMemcpyAsync(dst.data(), d, 4 * sizeof(int), musaMemcpyDeviceToHost, s_));
  musaGraph_t graph = nullptr;
  ASSERT_MUSA(musaStreamEndCapture(s_, &graph));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(dst, (std::vector<int>{0, 0, 0, 0}));
  size_t nodes = 0;
  ASSERT_MUSA(musaGraphGetNodeCount(graph, &nodes));
  EXPECT_EQ(nodes, 3u);
  musaGraphExec_t exec = nullptr;
  ASSERT_MUSA(musaGraphInstantiate(&exec, graph));
  // The graph reads the source at replay time.
  src = {5, 6, 7, 8};
  ASSERT_MUSA(musaGraphLaunch(exec, s_));
  ASSERT_MUSA(musaStreamSynchronize(s_));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(dst, (std::vector<int>{5, 6, 7, 8}));
  ASSERT_MUSA(musaGraphExecDestroy(exec));
  ASSERT_MUSA(musaGraphDestroy(graph));
  ASSERT_MUSA(musaFree(d));
}

TEST_F(CaptureTest, OtherStreamsRunNormallyDuringCapture) {
  musaStream_t other = nullptr;
  ASSERT_MUSA(musaStreamCreate(&other));
  int captured = 0, direct = 0;
  // Relaxed: waiting for an unrelated stream is allowed (global mode forbids it).
  ASSERT_MUSA(musaStreamBeginCaptureWithMode(s_, musaStreamCaptureModeRelaxed));
  ASSERT_MUSA(musaLaunchTask(s_, [&captured] { ++captured; }, "captured"));
  ASSERT_MUSA(musaLaunchTask(other, [&direct] { ++direct; }, "direct"));
  ASSERT_MUSA(musaStreamSynchronize(other));
  EXPECT_EQ(direct, 1);
  EXPECT_EQ(captured, 0);
  EXPECT_EQ(Status(other), musaStreamCaptureStatusNone);
  musaGraph_t graph = nullptr;
  ASSERT_MUSA(musaStreamEndCapture(s_, &graph));
  size_t nodes = 0;
  ASSERT_MUSA(musaGraphGetNodeCount(graph, &nodes));
  EXPECT_EQ(nodes, 1u) << "work on another stream leaked into the graph";
  ASSERT_MUSA(musaGraphDestroy(graph));
  ASSERT_MUSA(musaStreamDestroy(other));
}

// As in CUDA, an event recorded in a capture is a dependency point, not a
// node: the graph does not hold the event (it may be destroyed before a replay).
TEST_F(CaptureTest, EventRecordInCaptureAddsNoNode) {
  musaEvent_t start = nullptr, end = nullptr;
  ASSERT_MUSA(musaEventCreate(&start));
  ASSERT_MUSA(musaEventCreate(&end));
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaEventRecord(start, s_));
  ASSERT_MUSA(musaLaunchTask(s_, [] {}, "noop"));
  ASSERT_MUSA(musaEventRecord(end, s_));
  ASSERT_MUSA(musaEventDestroy(start));  // the graph must not refer to it
  musaGraph_t graph = nullptr;
  ASSERT_MUSA(musaStreamEndCapture(s_, &graph));
  size_t nodes = 0;
  ASSERT_MUSA(musaGraphGetNodeCount(graph, &nodes));
  EXPECT_EQ(nodes, 1u);
  musaGraphExec_t exec = nullptr;
  ASSERT_MUSA(musaGraphInstantiate(&exec, graph));
  ASSERT_MUSA(musaGraphLaunch(exec, s_));
  ASSERT_MUSA(musaStreamSynchronize(s_));
  ASSERT_MUSA(musaEventQuery(end));  // an event of an ended capture is queryable
  ASSERT_MUSA(musaGraphExecDestroy(exec));
  ASSERT_MUSA(musaGraphDestroy(graph));
  ASSERT_MUSA(musaEventDestroy(end));
}

TEST_F(CaptureTest, EmptyCapture) {
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  musaGraph_t graph = nullptr;
  ASSERT_MUSA(musaStreamEndCapture(s_, &graph));
  size_t nodes = 99;
  ASSERT_MUSA(musaGraphGetNodeCount(graph, &nodes));
  EXPECT_EQ(nodes, 0u);
  musaGraphExec_t exec = nullptr;
  ASSERT_MUSA(musaGraphInstantiate(&exec, graph));
  EXPECT_MUSA(musaGraphLaunch(exec, s_));
  ASSERT_MUSA(musaGraphExecDestroy(exec));
  ASSERT_MUSA(musaGraphDestroy(graph));
}

TEST_F(CaptureTest, SynchronizeDuringCaptureInvalidates) {
  int ran = 0;
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaLaunchTask(s_, [&ran] { ++ran; }, "inc"));
  musaGetLastError();
  EXPECT_EQ(musaStreamSynchronize(s_), musaErrorStreamCaptureUnsupported);
  EXPECT_EQ(musaGetLastError(), musaErrorStreamCaptureUnsupported);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("invalidated"), std::string::npos)
      << musaGetLastErrorMessage();
  EXPECT_EQ(Status(s_), musaStreamCaptureStatusInvalidated);
  EXPECT_EQ(ran, 0);

  musaGraph_t graph = reinterpret_cast<musaGraph_t>(0x1);
  EXPECT_EQ(musaStreamEndCapture(s_, &graph), musaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(ran, 0) << "the invalidated capture's work ran";
  // The stream is usable again, and runs work directly.
  EXPECT_EQ(Status(s_), musaStreamCaptureStatusNone);
  ASSERT_MUSA(musaLaunchTask(s_, [&ran] { ++ran; }, "inc"));
  ASSERT_MUSA(musaStreamSynchronize(s_));
  EXPECT_EQ(ran, 1);
  // And can capture again.
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaStreamEndCapture(s_, &graph));
  ASSERT_NE(graph, nullptr);
  ASSERT_MUSA(musaGraphDestroy(graph));
}

TEST_F(CaptureTest, OtherForbiddenCallsDuringCapture) {
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  EXPECT_EQ(musaStreamQuery(s_), musaErrorStreamCaptureUnsupported);
  EXPECT_EQ(musaDeviceSynchronize(), musaErrorStreamCaptureUnsupported);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("capturing"), std::string::npos)
      << musaGetLastErrorMessage();
  EXPECT_EQ(musaStreamDestroy(s_), musaErrorStreamCaptureUnsupported);
  EXPECT_EQ(musaStreamBeginCapture(s_), musaErrorStreamCaptureUnsupported) << "nested begin accepted";
  musaGraph_t graph = nullptr;
  EXPECT_EQ(musaStreamEndCapture(s_, &graph), musaErrorStreamCaptureInvalidated)
      << "the forbidden calls must invalidate the capture";
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("querying a stream"), std::string::npos)
      << musaGetLastErrorMessage();
  EXPECT_EQ(graph, nullptr);
  EXPECT_MUSA(musaDeviceSynchronize());
  EXPECT_EQ(musaStreamQuery(s_), musaSuccess);
}

TEST_F(CaptureTest, DefaultStreamCannotCapture) {
  EXPECT_EQ(musaStreamBeginCapture(nullptr), musaErrorStreamCaptureUnsupported);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("side stream"), std::string::npos)
      << musaGetLastErrorMessage();
  musaStream_t def = nullptr;
  ASSERT_MUSA(musaGetDefaultStream(0, &def));
  EXPECT_EQ(musaStreamBeginCapture(def), musaErrorStreamCaptureUnsupported);
  EXPECT_EQ(Status(def), musaStreamCaptureStatusNone);
  EXPECT_EQ(Status(nullptr), musaStreamCaptureStatusNone);
  int ran = 0;
  ASSERT_MUSA(musaLaunchTask(def, [&ran] { ++ran; }, "inc"));
  EXPECT_EQ(ran, 1) << "the refused capture left the default stream capturing";
}

TEST_F(CaptureTest, EndWithoutBeginAndNullArguments) {
  musaGraph_t graph = nullptr;
  EXPECT_EQ(musaStreamEndCapture(s_, &graph), musaErrorStreamCaptureUnmatched);
  EXPECT_EQ(musaStreamEndCapture(s_, nullptr), musaErrorInvalidValue);
  EXPECT_EQ(musaStreamEndCapture(nullptr, &graph), musaErrorInvalidValue);
  EXPECT_EQ(musaStreamIsCapturing(s_, nullptr), musaErrorInvalidValue);
  musaGraphExec_t exec = nullptr;
  EXPECT_EQ(musaGraphInstantiate(&exec, nullptr), musaErrorInvalidValue);
  EXPECT_EQ(musaGraphInstantiate(nullptr, nullptr), musaErrorInvalidValue);
  EXPECT_EQ(musaGraphLaunch(nullptr, s_), musaErrorInvalidValue);
  size_t n = 0;
  EXPECT_EQ(musaGraphGetNodeCount(nullptr, &n), musaErrorInvalidValue);
  EXPECT_MUSA(musaGraphDestroy(nullptr));
  EXPECT_MUSA(musaGraphExecDestroy(nullptr));
}

TEST_F(CaptureTest, TwoStreamsCaptureIndependently) {
  musaStream_t t = nullptr;
  ASSERT_MUSA(musaStreamCreate(&t));
  std::vector<char> log;
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaStreamBeginCapture(t));
  ASSERT_MUSA(musaLaunchTask(s_, [&log] { log.push_back('a'); }, "a"));
  ASSERT_MUSA(musaLaunchTask(t, [&log] { log.push_back('x'); }, "x"));
  ASSERT_MUSA(musaLaunchTask(s_, [&log] { log.push_back('b'); }, "b"));
  musaGraph_t gs = nullptr, gt = nullptr;
  ASSERT_MUSA(musaStreamEndCapture(t, &gt));
  ASSERT_MUSA(musaStreamEndCapture(s_, &gs));
  size_t ns = 0, nt = 0;
  ASSERT_MUSA(musaGraphGetNodeCount(gs, &ns));
  ASSERT_MUSA(musaGraphGetNodeCount(gt, &nt));
  EXPECT_EQ(ns, 2u);
  EXPECT_EQ(nt, 1u);
  musaGraphExec_t es = nullptr, et = nullptr;
  ASSERT_MUSA(musaGraphInstantiate(&es, gs));
  ASSERT_MUSA(musaGraphInstantiate(&et, gt));
  ASSERT_MUSA(musaGraphLaunch(et, t));
  ASSERT_MUSA(musaGraphLaunch(es, s_));
  ASSERT_MUSA(musaDeviceSynchronize());
  EXPECT_EQ(log, (std::vector<char>{'x', 'a', 'b'}));
  for (auto e : {es, et}) ASSERT_MUSA(musaGraphExecDestroy(e));
  for (auto g : {gs, gt}) ASSERT_MUSA(musaGraphDestroy(g));
  ASSERT_MUSA(musaStreamDestroy(t));
}

}  // namespace

// CUDA's capture modes: which thread's unsafe calls a capture forbids.
TEST_F(CaptureTest, CaptureModesDecideWhoMayMakeUnsafeCalls) {
  musaStream_t other = nullptr;
  ASSERT_MUSA(musaStreamCreate(&other));
  uint8_t* d = nullptr;
  ASSERT_MUSA(musaMalloc(reinterpret_cast<void**>(&d), 16));
  uint8_t host[16] = {};
  for (auto mode : {musaStreamCaptureModeGlobal, musaStreamCaptureModeThreadLocal, musaStreamCaptureModeRelaxed}) {
    SCOPED_TRACE(mode);
    ASSERT_MUSA(musaStreamBeginCaptureWithMode(s_, mode));
    musaError_t here = musaMemcpy(host, d, 16, musaMemcpyDeviceToHost);  // a blocking copy on this thread
    musaError_t there = musaSuccess;
    std::thread([&] { there = musaStreamSynchronize(other); }).join();
    EXPECT_EQ(here, mode == musaStreamCaptureModeRelaxed ? musaSuccess : musaErrorStreamCaptureUnsupported);
    EXPECT_EQ(there, mode == musaStreamCaptureModeGlobal ? musaErrorStreamCaptureUnsupported : musaSuccess);
    // Syncing the capturing stream itself conflicts in every mode.
    EXPECT_EQ(musaStreamSynchronize(s_), musaErrorStreamCaptureUnsupported);
    musaGraph_t graph = nullptr;
    EXPECT_EQ(musaStreamEndCapture(s_, &graph), musaErrorStreamCaptureInvalidated);
  }
  EXPECT_EQ(musaStreamBeginCaptureWithMode(s_, static_cast<musaStreamCaptureMode>(7)), musaErrorInvalidValue);
  ASSERT_MUSA(musaFree(d));
  ASSERT_MUSA(musaStreamDestroy(other));
}

// A side stream that waits on an event recorded in the capture joins it; its
// work lands in the same graph and must be joined back before the end.
TEST_F(CaptureTest, ForkedStreamsJoinTheCapture) {
  musaStream_t side = nullptr;
  ASSERT_MUSA(musaStreamCreate(&side));
  musaEvent_t fork = nullptr, join = nullptr;
  ASSERT_MUSA(musaEventCreate(&fork));
  ASSERT_MUSA(musaEventCreate(&join));
  std::vector<int> order;
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaLaunchTask(s_, [&order] { order.push_back(1); }, "main1"));
  ASSERT_MUSA(musaEventRecord(fork, s_));
  ASSERT_MUSA(musaStreamWaitEvent(side, fork, 0));
  EXPECT_EQ(Status(side), musaStreamCaptureStatusActive) << "the side stream did not join";
  ASSERT_MUSA(musaLaunchTask(side, [&order] { order.push_back(2); }, "side"));
  EXPECT_TRUE(order.empty()) << "side-stream work ran during capture";
  EXPECT_EQ(musaEventQuery(fork), musaErrorCapturedEvent);
  ASSERT_MUSA(musaEventRecord(join, side));
  ASSERT_MUSA(musaStreamWaitEvent(s_, join, 0));
  ASSERT_MUSA(musaLaunchTask(s_, [&order] { order.push_back(3); }, "main2"));
  musaGraph_t graph = nullptr;
  // The event query above invalidated that capture; capture again without it.
  EXPECT_EQ(musaStreamEndCapture(s_, &graph), musaErrorStreamCaptureInvalidated);
  EXPECT_EQ(Status(side), musaStreamCaptureStatusNone) << "ending the capture must release joined streams";

  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaLaunchTask(s_, [&order] { order.push_back(1); }, "main1"));
  ASSERT_MUSA(musaEventRecord(fork, s_));
  ASSERT_MUSA(musaStreamWaitEvent(side, fork, 0));
  ASSERT_MUSA(musaLaunchTask(side, [&order] { order.push_back(2); }, "side"));
  ASSERT_MUSA(musaEventRecord(join, side));
  ASSERT_MUSA(musaStreamWaitEvent(s_, join, 0));
  ASSERT_MUSA(musaLaunchTask(s_, [&order] { order.push_back(3); }, "main2"));
  EXPECT_EQ(musaStreamEndCapture(side, &graph), musaErrorStreamCaptureUnmatched) << "ended on a joined stream";
  ASSERT_MUSA(musaStreamEndCapture(s_, &graph));
  size_t nodes = 0;
  ASSERT_MUSA(musaGraphGetNodeCount(graph, &nodes));
  EXPECT_EQ(nodes, 3u);
  musaGraphExec_t exec = nullptr;
  ASSERT_MUSA(musaGraphInstantiate(&exec, graph));
  ASSERT_MUSA(musaGraphLaunch(exec, s_));
  ASSERT_MUSA(musaGraphLaunch(exec, s_));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 1, 2, 3}));
  std::string dot = ::testing::TempDir() + "musa_graph.dot";
  ASSERT_MUSA(musaGraphDebugDotPrint(graph, dot.c_str()));
  FILE* f = std::fopen(dot.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[4096] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  EXPECT_NE(std::string(buf, n).find("side"), std::string::npos) << std::string(buf, n);
  ASSERT_MUSA(musaGraphExecDestroy(exec));
  ASSERT_MUSA(musaGraphDestroy(graph));

  // Side-stream work the capture never waited for is an error, as in CUDA.
  ASSERT_MUSA(musaStreamBeginCapture(s_));
  ASSERT_MUSA(musaEventRecord(fork, s_));
  ASSERT_MUSA(musaStreamWaitEvent(side, fork, 0));
  ASSERT_MUSA(musaLaunchTask(side, [&order] { order.push_back(9); }, "unjoined"));
  EXPECT_EQ(musaStreamEndCapture(s_, &graph), musaErrorStreamCaptureUnjoined);
  EXPECT_NE(std::string(musaGetLastErrorMessage()).find("wait_stream"), std::string::npos) << musaGetLastErrorMessage();
  EXPECT_EQ(Status(side), musaStreamCaptureStatusNone);
  EXPECT_EQ(order.size(), 6u);
  ASSERT_MUSA(musaEventDestroy(fork));
  ASSERT_MUSA(musaEventDestroy(join));
  ASSERT_MUSA(musaStreamDestroy(side));
}
