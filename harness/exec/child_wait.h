// Waiting for a child process to end, without polling delays: d9m's worker and PyTorch's worker
// end as soon as their requests pipe closes, and a run should not sleep 100 ms to notice.
#pragma once

#include <sys/types.h>

#include <chrono>

namespace d9m {

// Waits up to `timeout` for the child `pid` to end and reaps it: true with its wait status in
// `status`; false while it still runs (or cannot be waited for: not a child, already reaped).
// Sleeps in the kernel on a pidfd where Linux has one (5.3+), else polls in steps of at most 10 ms.
bool wait_child_for(pid_t pid, int& status, std::chrono::milliseconds timeout);

}  // namespace d9m
