// Who is running a run. A run in state 'running' is only truly running while the process that
// writes it is alive; after a SIGKILL (or a power cut) nothing gets to write 'interrupted'. So a
// writer holds a lease: an open-file-description lock (F_OFD_SETLK) on one byte of the store's
// lease file "<store>-runlease", at an offset derived from the run id. The kernel drops the lock
// the moment the process dies, however it dies, and any later process can ask whether it is
// still held. OFD locks (not classic POSIX locks) because closing any other descriptor of the
// file must not drop them, and the lease file is separate from the database because SQLite's own
// POSIX locks on that file would be dropped by our closing a descriptor of it.
#pragma once
#include <string>

namespace d9m {

class RunLease {
 public:
  // Takes the lease of `run_id` on the store at `store_path`. False when another process
  // holds it (the run is alive elsewhere). Throws Error(environment) when the lease file cannot
  // be created or locked for another reason.
  bool acquire(const std::string& store_path, const std::string& run_id);
  void release();
  bool held() const { return fd_ >= 0; }

  // Whether some process holds the lease of `run_id` (false when there is no lease file).
  static bool taken(const std::string& store_path, const std::string& run_id);
  static std::string lease_path(const std::string& store_path) { return store_path + "-runlease"; }

  RunLease() = default;
  RunLease(RunLease&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RunLease& operator=(RunLease&& o) noexcept;
  RunLease(const RunLease&) = delete;
  RunLease& operator=(const RunLease&) = delete;
  ~RunLease() { release(); }

 private:
  int fd_ = -1;
};

}  // namespace d9m
