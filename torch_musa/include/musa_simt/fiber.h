// Fibers for the host SIMT emulation: each thread of a block is a fiber with its own
// stack, so __syncthreads() and warp operations can suspend one thread and run the
// next on the same OS thread. On x86-64 the switch is a few instructions (callee-saved
// registers and the FP control words); elsewhere ucontext is used (slower: it also
// saves the signal mask with a system call).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <new>

#if !defined(__x86_64__) || defined(MUSA_SIMT_UCONTEXT)
#include <ucontext.h>
#endif

// Everything here is private to each extension (no symbol is shared between two
// extensions, which may come from different torch_musa versions).
#pragma GCC visibility push(hidden)

namespace musa_simt {

using FiberEntry = void (*)(void* arg);

#if defined(__x86_64__) && !defined(MUSA_SIMT_UCONTEXT)  // MUSA_SIMT_UCONTEXT forces the portable path
// musa_simt_switch(void** save_sp, void* next_sp): saves this context on its stack,
// stores the stack pointer in *save_sp and resumes the context saved at next_sp.
// musa_simt_start: the first return address of a new fiber; calls r13(r12), never returns.
// COMDAT + weak + hidden: every translation unit may emit it, one copy per extension.
__asm__(R"(
  .section .text.musa_simt_switch,"axG",@progbits,musa_simt_switch,comdat
  .weak musa_simt_switch
  .hidden musa_simt_switch
  .type musa_simt_switch,@function
musa_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size musa_simt_switch, .-musa_simt_switch
  .section .text.musa_simt_start,"axG",@progbits,musa_simt_start,comdat
  .weak musa_simt_start
  .hidden musa_simt_start
  .type musa_simt_start,@function
musa_simt_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size musa_simt_start, .-musa_simt_start
  .text
)");
extern "C" void musa_simt_switch(void** save_sp, void* next_sp);
extern "C" void musa_simt_start();

// One suspended context: just its saved stack pointer.
struct Context {
  void* sp = nullptr;
};

inline void switch_context(Context* from, Context* to) { musa_simt_switch(&from->sp, to->sp); }

// Prepares `ctx` to run entry(arg) on [stack, stack + size) at its first switch.
inline void make_context(Context* ctx, void* stack, size_t size, FiberEntry entry, void* arg) {
  auto top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15);
  auto* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = 0;                                               // keeps the start's stack 16-aligned
  *--sp = reinterpret_cast<uint64_t>(&musa_simt_start);    // ret target
  *--sp = 0;                                               // rbp
  *--sp = 0;                                               // rbx
  *--sp = reinterpret_cast<uint64_t>(arg);                 // r12
  *--sp = reinterpret_cast<uint64_t>(entry);               // r13
  *--sp = 0;                                               // r14
  *--sp = 0;                                               // r15
  *--sp = 0x037F00001F80ull;                               // mxcsr (low), x87 control word (high)
  ctx->sp = sp;
}
#else
struct Context {
  ucontext_t uc;
};

inline void switch_context(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }

inline void trampoline(unsigned eh, unsigned el, unsigned ah, unsigned al) {
  auto entry = reinterpret_cast<FiberEntry>((uintptr_t(eh) << 32) | el);
  entry(reinterpret_cast<void*>((uintptr_t(ah) << 32) | al));
}

inline void make_context(Context* ctx, void* stack, size_t size, FiberEntry entry, void* arg) {
  getcontext(&ctx->uc);
  ctx->uc.uc_stack.ss_sp = stack;
  ctx->uc.uc_stack.ss_size = size;
  ctx->uc.uc_link = nullptr;
  // makecontext passes ints: split the two pointers into 32-bit halves.
  auto e = reinterpret_cast<uintptr_t>(entry), a = reinterpret_cast<uintptr_t>(arg);
  makecontext(&ctx->uc, reinterpret_cast<void (*)()>(&trampoline), 4, unsigned(e >> 32), unsigned(e),
              unsigned(a >> 32), unsigned(a));
}

#endif

// Fiber stacks: one mapping per worker, a guard page below each stack so an overflow
// faults instead of corrupting the neighbour.
class StackArena {
 public:
  StackArena() = default;
  StackArena(const StackArena&) = delete;
  StackArena& operator=(const StackArena&) = delete;
  ~StackArena() { release(); }

  // Makes room for n stacks of `size` bytes each (existing ones are kept only when n fits).
  bool reserve(size_t n, size_t size) {
    if (n <= count_ && size == size_) return true;
    release();
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    slot_ = size + page;
    void* p = mmap(nullptr, slot_ * n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    base_ = static_cast<char*>(p);
    for (size_t i = 0; i < n; ++i) mprotect(base_ + i * slot_, page, PROT_NONE);
    count_ = n;
    size_ = size;
    page_ = page;
    return true;
  }
  void* stack(size_t i) const { return base_ + i * slot_ + page_; }
  bool holds(const void* p) const {
    auto c = static_cast<const char*>(p);
    return base_ && c >= base_ && c < base_ + slot_ * count_;
  }
  size_t stack_size() const { return size_; }
  size_t count() const { return count_; }

 private:
  void release() {
    if (base_) munmap(base_, slot_ * count_);
    base_ = nullptr;
    count_ = 0;
  }
  char* base_ = nullptr;
  size_t count_ = 0, size_ = 0, slot_ = 0, page_ = 0;
};

}  // namespace musa_simt

#pragma GCC visibility pop
