// The deadline of a watchdog that waits on a child process's pipe (worker isolation's, and the
// PyTorch worker's without it). Time this process spent stopped (Ctrl-Z, SIGSTOP) or starved is
// not the case's: the child sits in the same process group and was stopped with it, so a trial
// that resumes after a long Ctrl-Z must not be killed for the pause.
#pragma once

#include <chrono>

namespace d9m {

class WatchdogDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // `turn` is the longest a waiting loop sleeps between two looks (its poll timeout plus
  // slack): a longer gap between looks means the process was not running, and the deadline
  // moves on by the gap.
  WatchdogDeadline(Clock::duration timeout, Clock::duration turn, Clock::time_point now = Clock::now())
      : timeout_(timeout), turn_(turn), deadline_(now + timeout), last_look_(now) {}

  // A sign of life (a trial done): the whole timeout again from now.
  void renew(Clock::time_point now = Clock::now()) {
    deadline_ = now + timeout_;
    last_look_ = now;
  }

  // Called once per loop turn: the time left, zero or less once the deadline has passed.
  Clock::duration left(Clock::time_point now = Clock::now()) {
    if (now - last_look_ > turn_) deadline_ += now - last_look_;
    last_look_ = now;
    return deadline_ - now;
  }

 private:
  Clock::duration timeout_, turn_;
  Clock::time_point deadline_, last_look_;
};

}  // namespace d9m
