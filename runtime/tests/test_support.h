// Shared helpers for the runtime's GoogleTest suite (host driver).
#pragma once

#include <gtest/gtest.h>
#include <musa/runtime.h>

#include <map>
#include <string>

// Asserts a runtime call succeeded, printing the runtime's detailed message if not.
#define ASSERT_MUSA(expr)                                                             \
  do {                                                                                \
    musaError_t musa_rt_err_ = (expr);                                                \
    ASSERT_EQ(musa_rt_err_, musaSuccess)                                              \
        << #expr << " -> " << musaGetErrorName(musa_rt_err_) << ": "                  \
        << musaGetLastErrorMessage();                                                 \
  } while (0)
#define EXPECT_MUSA(expr)                                                             \
  do {                                                                                \
    musaError_t musa_rt_err_ = (expr);                                                \
    EXPECT_EQ(musa_rt_err_, musaSuccess)                                              \
        << #expr << " -> " << musaGetErrorName(musa_rt_err_) << ": "                  \
        << musaGetLastErrorMessage();                                                 \
  } while (0)

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kGiB = size_t(1) << 30;

namespace musa_test {

// True in a process started by RunSelfAsChild (MUSA_RT_CHILD is set).
bool IsChild();

struct ChildResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string output;  // stdout and stderr together
};

// Re-executes this test binary (/proc/self/exe) running only the current test,
// with MUSA_RT_CHILD=1, TORCH_MUSA_DRIVER=host and the runtime's environment
// variables cleared, then `env` applied on top. The runtime reads its
// environment once per process, so this is how environment-dependent
// behaviour is tested.
ChildResult RunSelfAsChild(const std::map<std::string, std::string>& env);

// Runs the current test in a child with `env` and expects it to have run and passed.
void ExpectChildPasses(const std::map<std::string, std::string>& env);

}  // namespace musa_test

// A test whose body runs in a child process with the given environment:
//   ENV_TEST(Env, Foo, {{"MUSA_VISIBLE_DEVICES", "1"}}) { ...assertions... }
// In the normal run the test spawns the child and checks it passed; in the
// child the body runs (with a fresh runtime that sees the environment).
#define ENV_TEST(suite, name, ...)                                                    \
  static void suite##_##name##_ChildBody();                                           \
  TEST(suite, name) {                                                                 \
    if (!musa_test::IsChild()) {                                                      \
      musa_test::ExpectChildPasses(__VA_ARGS__);                                      \
      return;                                                                         \
    }                                                                                 \
    suite##_##name##_ChildBody();                                                     \
  }                                                                                   \
  static void suite##_##name##_ChildBody()
