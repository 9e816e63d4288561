#include "harness/exec/child_wait.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace d9m {

namespace {

bool reaped(pid_t pid, int& status) {
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno == EINTR) continue;
    return false;
  }
}

}  // namespace

bool wait_child_for(pid_t pid, int& status, std::chrono::milliseconds timeout) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + timeout;
  if (reaped(pid, status)) return true;
#ifdef SYS_pidfd_open
  if (const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); fd >= 0) {
    // Readable once the process has ended.
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0)));
      if (r < 0 && errno == EINTR) continue;
      break;
    }
    ::close(fd);
    return reaped(pid, status);
  }
#endif
  // No pidfd (an old kernel, a sandbox without it): poll, first often, then every 10 ms.
  auto step = std::chrono::microseconds(200);
  while (clock::now() < deadline) {
    ::usleep(static_cast<useconds_t>(step.count()));
    if (reaped(pid, status)) return true;
    step = std::min<std::chrono::microseconds>(step * 2, std::chrono::milliseconds(10));
  }
  return reaped(pid, status);
}

}  // namespace d9m
