// Test-process setup and the self re-exec helper used by the environment tests.
#include "test_support.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace {

// The runtime's environment variables; cleared so the default run always sees
// the host driver's defaults (2 devices of 8GiB each, all visible).
const char* const kRuntimeVars[] = {"TORCH_MUSA_DRIVER", "TORCH_MUSA_HOST_DEVICES",
                                    "TORCH_MUSA_HOST_MEMORY", "MUSA_VISIBLE_DEVICES",
                                    "TORCH_MUSA_CUDA_DRIVER_LIB"};

// Runs before main and so before the runtime's first call (its state is built
// lazily on first use). A child keeps the environment its parent gave it.
struct ForceHostDriver {
  ForceHostDriver() {
    if (std::getenv("MUSA_RT_CHILD")) return;
    for (const char* v : kRuntimeVars) unsetenv(v);
    setenv("TORCH_MUSA_DRIVER", "host", 1);
  }
} force_host_driver;

bool dropFromChildEnv(const std::string& entry) {
  auto eq = entry.find('=');
  std::string key = entry.substr(0, eq);
  for (const char* v : kRuntimeVars)
    if (key == v) return true;
  return key == "MUSA_RT_CHILD" || key.rfind("GTEST_", 0) == 0;
}

}  // namespace

namespace musa_test {

bool IsChild() { return std::getenv("MUSA_RT_CHILD") != nullptr; }

ChildResult RunSelfAsChild(const std::map<std::string, std::string>& env) {
  ChildResult result;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = std::string("--gtest_filter=") + info->test_suite_name() + "." + info->name();

  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e)
    if (!dropFromChildEnv(*e)) envs.emplace_back(*e);
  envs.emplace_back("MUSA_RT_CHILD=1");
  std::map<std::string, std::string> merged{{"TORCH_MUSA_DRIVER", "host"}};
  for (auto& kv : env) merged[kv.first] = kv.second;
  for (auto& kv : merged) envs.push_back(kv.first + "=" + kv.second);

  std::string exe = "/proc/self/exe";
  std::vector<char*> argv{exe.data(), filter.data(), nullptr};
  std::vector<char*> envp;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe failed: ") + strerror(errno);
    return result;
  }
  pid_t pid = fork();
  if (pid < 0) {
    result.output = std::string("fork failed: ") + strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return result;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

void ExpectChildPasses(const std::map<std::string, std::string>& env) {
  ChildResult r = RunSelfAsChild(env);
  std::string described;
  for (auto& kv : env) described += kv.first + "=" + kv.second + " ";
  EXPECT_EQ(r.exit_code, 0) << "child with " << described << "failed:\n" << r.output;
  // The child must actually have run this one test (not filtered out or skipped).
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test."), std::string::npos)
      << "child with " << described << "did not run exactly one passing test:\n" << r.output;
  EXPECT_EQ(r.output.find("[  SKIPPED ]"), std::string::npos) << r.output;
}

}  // namespace musa_test
