// The host SIMT engine: runs a kernel's grid on the CPU. Blocks are spread over a
// pool of OS threads (the launching thread included); inside a block every thread is
// a fiber, run in turn until it finishes or waits at a barrier (__syncthreads, a warp
// operation). A barrier is released once every live thread it waits for has arrived,
// so block-wide and warp-wide synchronization behave as on a GPU. Static __shared__
// variables are thread_local (one block at a time per OS thread); dynamic shared
// memory is one buffer per OS thread.
#pragma once

#include <musa/runtime.h>

#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fiber.h"
#include "vector_types.h"

// Everything here is private to each extension (no symbol is shared between two
// extensions, which may come from different torch_musa versions).
#pragma GCC visibility push(hidden)

namespace musa_simt {

constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;
// What a GPU grants a launch without opting in (cudaFuncAttributeMaxDynamicSharedMemorySize).
constexpr size_t kMaxDynamicShared = 48 * 1024;
constexpr size_t kDynamicSharedBuffer = 64 * 1024;

enum class State : uint8_t { Ready, AtBlock, AtWarp, Done };
enum class WarpOp : uint8_t { Sync, Idx, Up, Down, Xor, Ballot, Any, All };
enum class BlockOp : uint8_t { Sync, Count, And, Or };

struct Lane {
  Context ctx;
  uint3 tid;
  unsigned index;
  State state;
  WarpOp wop;
  BlockOp bop;
  unsigned mask;
  int arg;
  int width;
  uint64_t value;
  uint64_t result;
};

struct LaunchConfig {
  dim3 grid, block;
  size_t shared;
  musaStream_t stream;
};

// One grid in flight: what every OS thread working on it reads, and the first fault.
struct Grid {
  LaunchConfig cfg;
  const char* name;
  void (*fn)(void*);
  void* ctx;
  uint64_t total;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  musaError_t code = musaSuccess;
  std::string message;

  void fault(musaError_t c, const std::string& what) {
    std::lock_guard<std::mutex> g(mu);
    if (!failed.exchange(true)) {
      code = c;
      message = what;
    }
  }
};

inline size_t stack_bytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("MUSA_SIMT_STACK_KIB");
    long kib = v ? std::atol(v) : 0;
    return static_cast<size_t>(kib >= 16 ? kib : 64) * 1024;
  }();
  return bytes;
}

inline std::string dims(dim3 d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

class Worker;

// Turns a segmentation fault inside a kernel into the GPU's musaErrorIllegalAddress: the
// handler jumps back to the faulting OS thread's block runner (Worker::run_blocks), which
// abandons the grid. Faults outside kernels go to the handler that was there before.
struct FaultTrap {
  static void install() {
    static std::once_flag once;
    std::call_once(once, [] {
      struct sigaction sa {};
      sa.sa_sigaction = &handler;
      sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGSEGV, &sa, &previous(SIGSEGV));
      sigaction(SIGBUS, &sa, &previous(SIGBUS));
    });
  }
  static struct sigaction& previous(int sig) {
    static struct sigaction segv {}, bus {};
    return sig == SIGBUS ? bus : segv;
  }
  static void handler(int sig, siginfo_t* info, void* uctx);
};

// The running fiber's lane and its OS thread's worker: plain pointers, read by threadIdx & co.
inline thread_local Lane* t_lane = nullptr;
inline thread_local Worker* t_worker = nullptr;

// Per OS thread: the fibers (reused from block to block), the scheduler's context and the
// block being run. Fibers never move between OS threads.
class Worker {
 public:
  static Worker& current() {
    static thread_local Worker w;
    return w;
  }

  // The block being run, read by the device built-ins.
  Grid* grid = nullptr;
  uint3 block_idx{0, 0, 0};
  char* dyn_shared = nullptr;

  // Set while this thread runs blocks: where a fault in a kernel lands.
  sigjmp_buf trap;
  volatile bool trap_armed = false;
  void* volatile fault_addr = nullptr;

  // Runs every block this thread claims from `g`.
  void run_blocks(Grid& g) {
    const dim3 b = g.cfg.block;
    const unsigned n = b.x * b.y * b.z;
    if (!prepare(n)) {
      g.fault(musaErrorMemoryAllocation, std::string("kernel '") + g.name + "': cannot map fiber stacks for " +
                                             std::to_string(n) + " threads");
      return;
    }
    grid = &g;
    t_worker = this;
    if (sigsetjmp(trap, 1)) {
      illegal_address(g);
      grid = nullptr;
      t_lane = nullptr;
      t_worker = nullptr;
      return;
    }
    trap_armed = true;
    for (;;) {
      if (g.failed.load(std::memory_order_relaxed)) break;
      uint64_t i = g.next.fetch_add(1, std::memory_order_relaxed);
      if (i >= g.total) break;
      const dim3 gd = g.cfg.grid;
      block_idx = uint3{static_cast<unsigned>(i % gd.x), static_cast<unsigned>((i / gd.x) % gd.y),
                        static_cast<unsigned>(i / (uint64_t(gd.x) * gd.y))};
      run_block(g, n);
    }
    trap_armed = false;
    grid = nullptr;
    t_lane = nullptr;
    t_worker = nullptr;
  }

  // Suspends the calling fiber until the scheduler releases it.
  void wait(State s) {
    Lane* l = t_lane;
    l->state = s;
    ++(s == State::AtBlock ? at_block_ : at_warp_);
    switch_context(&l->ctx, &sched_);
  }

 private:
  Worker() = default;
  ~Worker() {
    if (alt_stack_) {
      stack_t off{};
      off.ss_flags = SS_DISABLE;
      sigaltstack(&off, nullptr);
      std::free(alt_stack_);
    }
    std::free(dyn_shared);
  }

  void illegal_address(Grid& g) {
    char addr[32];
    std::snprintf(addr, sizeof(addr), "%p", fault_addr);
    std::string what = std::string("kernel '") + g.name + "' block " + dims(dim3(block_idx)) + " thread " +
                       (t_lane ? dims(dim3(t_lane->tid)) : std::string("?")) +
                       ": illegal memory access at address " + addr;
    if (stacks_.holds(fault_addr))
      what += " (a thread overflowed its " + std::to_string(stacks_.stack_size() / 1024) +
              " KiB stack; set MUSA_SIMT_STACK_KIB)";
    g.fault(musaErrorIllegalAddress, what);
    for (unsigned i = 0; i < made_; ++i) init_lane(i);  // the block's fibers were mid-kernel
  }

  // A signal stack, so a fault on a fiber's guard page can still be handled.
  void ensure_alt_stack() {
    if (alt_stack_) return;
    stack_t cur{};
    if (sigaltstack(nullptr, &cur) == 0 && !(cur.ss_flags & SS_DISABLE)) return;  // the thread has one
    const size_t size = 64 * 1024;
    alt_stack_ = std::malloc(size);
    if (!alt_stack_) return;
    stack_t ss{};
    ss.ss_sp = alt_stack_;
    ss.ss_size = size;
    sigaltstack(&ss, nullptr);
  }

  static void fiber_main(void* arg) {
    Lane* l = static_cast<Lane*>(arg);
    for (;;) {
      Worker& w = *t_worker;
      try {
        w.grid->fn(w.grid->ctx);
      } catch (const std::exception& e) {
        w.fault_here(std::string("threw ") + e.what());
      } catch (...) {
        w.fault_here("threw an exception");
      }
      l->state = State::Done;
      ++w.done_;
      switch_context(&l->ctx, &w.sched_);
    }
  }

  void fault_here(const std::string& what) {
    grid->fault(musaErrorLaunchFailure, std::string("kernel '") + grid->name + "' block " +
                                            dims(dim3(block_idx)) + " thread " + dims(dim3(t_lane->tid)) + " " + what);
    aborted_ = true;
  }

  bool prepare(unsigned n) {
    FaultTrap::install();
    ensure_alt_stack();
    if (!dyn_shared) {
      dyn_shared = static_cast<char*>(std::aligned_alloc(256, kDynamicSharedBuffer));
      if (!dyn_shared) return false;
    }
    if (!lanes_) lanes_.reset(new Lane[kMaxThreadsPerBlock]);
    if (stacks_.count() == 0) {
      if (!stacks_.reserve(kMaxThreadsPerBlock, stack_bytes())) return false;
    }
    for (; made_ < n; ++made_) init_lane(made_);
    return true;
  }

  void init_lane(unsigned i) {
    Lane& l = lanes_[i];
    l.index = i;
    make_context(&l.ctx, stacks_.stack(i), stacks_.stack_size(), &Worker::fiber_main, &l);
  }

  void run_block(Grid& g, unsigned n) {
    const dim3 b = g.cfg.block;
    for (unsigned i = 0; i < n; ++i) {
      Lane& l = lanes_[i];
      l.tid = uint3{i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
      l.state = State::Ready;
    }
    aborted_ = false;
    at_block_ = at_warp_ = done_ = 0;
    const unsigned warps = (n + kWarpSize - 1) / kWarpSize;
    for (;;) {
      for (unsigned i = 0; i < n && !aborted_; ++i) {
        Lane& l = lanes_[i];
        if (l.state != State::Ready) continue;
        t_lane = &l;
        switch_context(&sched_, &l.ctx);
      }
      if (aborted_) break;
      if (done_ == n) return;
      bool released = false;
      if (at_warp_)
        for (unsigned w = 0; w < warps; ++w) released |= release_warp(w, n);
      if (at_block_ && at_block_ + done_ == n) {
        release_block(n);
        released = true;
      }
      if (!released) {
        g.fault(musaErrorLaunchFailure, "kernel '" + std::string(g.name) + "' block " + dims(dim3(block_idx)) +
                                            " cannot continue: " + std::to_string(at_block_) + " of " +
                                            std::to_string(n - done_) +
                                            " live threads wait at __syncthreads() and the others at a warp "
                                            "operation whose lanes never all arrive (divergent barrier)");
        aborted_ = true;
        break;
      }
    }
    // The fibers of an aborted block are mid-kernel: start them afresh for the next block.
    for (unsigned i = 0; i < n; ++i) init_lane(i);
  }

  // Releases the lanes of warp w whose operation has every live lane of its mask waiting.
  bool release_warp(unsigned w, unsigned n) {
    const unsigned first = w * kWarpSize;
    const unsigned count = n - first < kWarpSize ? n - first : kWarpSize;
    unsigned live_mask = 0, waiting = 0;
    for (unsigned k = 0; k < count; ++k) {
      State s = lanes_[first + k].state;
      if (s != State::Done) live_mask |= 1u << k;
      if (s == State::AtWarp) waiting |= 1u << k;
    }
    if (!waiting) return false;
    unsigned go = 0;
    for (unsigned k = 0; k < count; ++k)
      if ((waiting >> k & 1) && ((lanes_[first + k].mask & live_mask) & ~waiting) == 0) go |= 1u << k;
    if (!go) return false;
    Lane* ln = &lanes_[first];
    for (unsigned k = 0; k < count; ++k) {
      if (!(go >> k & 1)) continue;
      Lane& l = ln[k];
      const unsigned m = l.mask & go;
      const int width = l.width >= 1 && l.width <= 32 ? l.width : 32;
      const int base = static_cast<int>(k) / width * width;
      int src = static_cast<int>(k);
      switch (l.wop) {
        case WarpOp::Idx: src = base + ((l.arg % width) + width) % width; break;
        case WarpOp::Up: src = static_cast<int>(k) - l.arg >= base ? static_cast<int>(k) - l.arg : src; break;
        case WarpOp::Down: src = static_cast<int>(k) + l.arg < base + width ? static_cast<int>(k) + l.arg : src; break;
        case WarpOp::Xor: src = (static_cast<int>(k) ^ l.arg) < base + width ? (static_cast<int>(k) ^ l.arg) : src; break;
        default: break;
      }
      unsigned votes = 0;
      if (l.wop == WarpOp::Ballot || l.wop == WarpOp::Any || l.wop == WarpOp::All)
        for (unsigned j = 0; j < count; ++j)
          if ((m >> j & 1) && ln[j].value != 0) votes |= 1u << j;
      switch (l.wop) {
        case WarpOp::Ballot: l.result = votes; break;
        case WarpOp::Any: l.result = votes != 0; break;
        case WarpOp::All: l.result = votes == m; break;
        case WarpOp::Sync: break;
        default: l.result = src >= 0 && src < static_cast<int>(count) && (go >> src & 1) ? ln[src].value : l.value;
      }
    }
    for (unsigned k = 0; k < count; ++k)
      if (go >> k & 1) ln[k].state = State::Ready;
    at_warp_ -= __builtin_popcount(go);
    return true;
  }

  void release_block(unsigned n) {
    uint64_t at = 0, votes = 0;
    for (unsigned i = 0; i < n; ++i) {
      if (lanes_[i].state != State::AtBlock) continue;
      ++at;
      votes += lanes_[i].value != 0;
    }
    for (unsigned i = 0; i < n; ++i) {
      Lane& l = lanes_[i];
      if (l.state != State::AtBlock) continue;
      l.result = l.bop == BlockOp::Count ? votes : l.bop == BlockOp::And ? votes == at : votes != 0;
      l.state = State::Ready;
    }
    at_block_ = 0;
  }

  Context sched_;
  StackArena stacks_;
  std::unique_ptr<Lane[]> lanes_;
  unsigned made_ = 0;
  unsigned at_block_ = 0, at_warp_ = 0, done_ = 0;  // lanes of the running block in each state
  bool aborted_ = false;
  void* alt_stack_ = nullptr;
};

inline void FaultTrap::handler(int sig, siginfo_t* info, void* uctx) {
  Worker* w = t_worker;
  if (w && w->trap_armed) {
    w->trap_armed = false;
    w->fault_addr = info->si_addr;
    siglongjmp(w->trap, 1);
  }
  struct sigaction& p = previous(sig);
  if (p.sa_flags & SA_SIGINFO) {
    if (p.sa_sigaction) p.sa_sigaction(sig, info, uctx);
  } else if (p.sa_handler == SIG_DFL) {
    signal(sig, SIG_DFL);  // the fault repeats on return and takes the default action
  } else if (p.sa_handler != SIG_IGN) {
    p.sa_handler(sig);
  }
}

// The OS threads blocks run on: hardware_concurrency() of them (MUSA_SIMT_THREADS
// overrides), the launching thread being one. Grids run one at a time.
class Pool {
 public:
  static Pool& get() {
    static Pool* p = new Pool();  // never destroyed: detached threads may outlive main's statics
    return *p;
  }

  void run(Grid& g) {
    std::lock_guard<std::mutex> one_grid(grid_mu_);
    if (g.total > 1 && workers_ > 0) {
      std::unique_lock<std::mutex> lk(mu_);
      start_threads();
      job_ = &g;
      ++generation_;
      cv_.notify_all();
    }
    Worker::current().run_blocks(g);
    if (g.total > 1 && workers_ > 0) {
      std::unique_lock<std::mutex> lk(mu_);
      job_ = nullptr;
      done_cv_.wait(lk, [&] { return busy_ == 0; });
    }
  }

 private:
  Pool() {
    const char* v = std::getenv("MUSA_SIMT_THREADS");
    long n = v ? std::atol(v) : static_cast<long>(std::thread::hardware_concurrency());
    workers_ = n > 1 ? static_cast<unsigned>(n - 1) : 0;
  }

  void start_threads() {
    if (started_) return;
    started_ = true;
    for (unsigned i = 0; i < workers_; ++i) std::thread([this] { loop(); }).detach();
  }

  void loop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return generation_ != seen; });
      seen = generation_;
      Grid* g = job_;
      if (!g) continue;
      ++busy_;
      lk.unlock();
      Worker::current().run_blocks(*g);
      lk.lock();
      if (--busy_ == 0) done_cv_.notify_all();
    }
  }

  std::mutex grid_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  Grid* job_ = nullptr;
  uint64_t generation_ = 0;
  unsigned busy_ = 0, workers_ = 0;
  bool started_ = false;
};

// Checks a launch as a GPU would; records the error (musaGetLastError) and returns false.
inline bool validate(const LaunchConfig& c, const char* name) {
  auto bad = [&](musaError_t code, const std::string& why) {
    std::string msg = std::string("kernel '") + name + "' launched with grid " + dims(c.grid) + ", block " +
                      dims(c.block) + ", " + std::to_string(c.shared) + " bytes of dynamic shared memory: " + why;
    musaSetLastError(code, msg.c_str());
    return false;
  };
  const char* driver = musaGetDriverName();
  if (!driver || std::strcmp(driver, "host") != 0)
    return bad(musaErrorNotSupported, std::string("this extension was built for the host driver (SIMT emulation) but "
                                                  "the active driver is '") +
                                          (driver ? driver : "none") + "'; rebuild it under that driver");
  const dim3 b = c.block, g = c.grid;
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (threads == 0 || g.x == 0 || g.y == 0 || g.z == 0)
    return bad(musaErrorInvalidConfiguration, "a grid or block dimension is zero");
  // (An H200 under CUDA 13 reports an oversized block as cudaErrorInvalidValue, measured.)
  if (b.x > 1024 || b.y > 1024 || b.z > 64 || threads > kMaxThreadsPerBlock)
    return bad(musaErrorInvalidValue,
               std::to_string(threads) + " threads per block; the device allows at most " +
                   std::to_string(kMaxThreadsPerBlock) + " (x, y <= 1024, z <= 64)");
  if (g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    return bad(musaErrorInvalidConfiguration, "grid dimensions above (2^31-1, 65535, 65535)");
  if (c.shared > kMaxDynamicShared)
    return bad(musaErrorInvalidValue, "more dynamic shared memory than the " + std::to_string(kMaxDynamicShared) +
                                          " bytes a block may use");
  return true;
}

// The task a launch puts on its stream: runs the grid, reports a fault as the GPU's
// asynchronous error would surface (musaGetLastError on the thread that ran it).
inline void run_grid(const LaunchConfig& c, const char* name, void (*fn)(void*), void* ctx) {
  Grid g;
  g.cfg = c;
  g.name = name;
  g.fn = fn;
  g.ctx = ctx;
  g.total = uint64_t(c.grid.x) * c.grid.y * c.grid.z;
  Pool::get().run(g);
  if (g.failed) musaSetLastError(g.code, g.message.c_str());
}

}  // namespace musa_simt

#pragma GCC visibility pop
