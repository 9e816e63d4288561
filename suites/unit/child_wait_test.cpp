// wait_child_for (harness/exec/child_wait.h): a child that has ended is reaped with its status at
// once, one still running is not waited for past the timeout.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "harness/exec/child_wait.h"

namespace d9m {
namespace {

pid_t child_that(int exit_code, unsigned sleep_ms) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::usleep(sleep_ms * 1000);
    ::_exit(exit_code);
  }
  return pid;
}

TEST(ChildWait, AnEndedChildIsReapedWithItsStatusWithoutWaitingOutTheTimeout) {
  const pid_t pid = child_that(7, 20);
  ASSERT_GT(pid, 0);
  int status = 0;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_child_for(pid, status, std::chrono::seconds(10)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  EXPECT_FALSE(wait_child_for(pid, status, std::chrono::milliseconds(10)));  // already reaped
}

TEST(ChildWait, ARunningChildIsLeftRunningAfterTheTimeout) {
  const pid_t pid = child_that(0, 10'000);
  ASSERT_GT(pid, 0);
  int status = 0;
  EXPECT_FALSE(wait_child_for(pid, status, std::chrono::milliseconds(50)));
  ::kill(pid, SIGKILL);
  ASSERT_TRUE(wait_child_for(pid, status, std::chrono::seconds(10)));
  EXPECT_TRUE(WIFSIGNALED(status));
}

}  // namespace
}  // namespace d9m
