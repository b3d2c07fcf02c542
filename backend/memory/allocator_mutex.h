// Internal to the musa caching allocator: the per-device lock.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace torch_musa::allocator {
namespace detail {

// Recursive (a MemPool's own allocator, called under the lock, may allocate musa memory
// again), and cheap when nobody else holds it: one compare-exchange to take and one exchange to
// give back, where std::recursive_mutex's pthread calls cost a small allocation's whole
// bookkeeping again. A thread that must wait sleeps on a futex (Drepper's three-state mutex).
class AllocatorMutex {
 public:
  void lock() {
    auto me = std::this_thread::get_id();
    // Only this thread stores its own id in owner_, and it clears it before unlocking: reading
    // its own id means it holds the lock, whatever other threads store meanwhile.
    if (owner_.load(std::memory_order_relaxed) == me) {
      ++depth_;
      return;
    }
    int c = kFree;
    if (!state_.compare_exchange_strong(c, kLocked, std::memory_order_acquire)) wait(c);
    owner_.store(me, std::memory_order_relaxed);
    depth_ = 1;
  }

  void unlock() {
    if (--depth_ > 0) return;
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    if (state_.exchange(kFree, std::memory_order_release) == kContended) futex(FUTEX_WAKE_PRIVATE, 1);
  }

 private:
  enum : int { kFree = 0, kLocked = 1, kContended = 2 };

  void wait(int c) {
    if (c != kContended) c = state_.exchange(kContended, std::memory_order_acquire);
    while (c != kFree) {
      futex(FUTEX_WAIT_PRIVATE, kContended);  // returns at once if no longer contended
      c = state_.exchange(kContended, std::memory_order_acquire);
    }
  }

  void futex(int op, int value) {
    static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free);
    syscall(SYS_futex, reinterpret_cast<int*>(&state_), op, value, nullptr, nullptr, 0);
  }

  std::atomic<int> state_{kFree};
  std::atomic<std::thread::id> owner_{};
  int depth_ = 0;  // touched only by the holder
};

}  // namespace detail
}  // namespace torch_musa::allocator
