#include "harness/store/run_lease.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "harness/core/error.h"

namespace d9m {

namespace {

// One byte per run, at 2^40 plus 40 bits of the run id (random hex): two live runs of one store
// collide with probability 2^-40.
off_t lease_offset(const std::string& run_id) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 10 && i < run_id.size(); ++i) {
    const char c = run_id[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'f' ? c - 'a' + 10 : (c & 15));
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  return static_cast<off_t>((std::uint64_t{1} << 40) + v);
}

struct flock lease_lock(short type, const std::string& run_id) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = lease_offset(run_id);
  fl.l_len = 1;
  fl.l_pid = 0;  // required by OFD locks
  return fl;
}

}  // namespace

RunLease& RunLease::operator=(RunLease&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

bool RunLease::acquire(const std::string& store_path, const std::string& run_id) {
  release();
  const std::string path = lease_path(store_path);
  // O_CLOEXEC: a worker process started for a case must not inherit (and so keep alive) the lease.
  // 0666 less the umask, like SQLite's -wal and -shm: whoever may write the store may run on it.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) fail_environment(path + ": cannot open the run lease file (" + std::strerror(errno) + ")");
  struct flock fl = lease_lock(F_WRLCK, run_id);
  if (::fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EAGAIN || err == EACCES) return false;
    fail_environment(path + ": cannot lock the run lease (" + std::strerror(err) + ")");
  }
  fd_ = fd;
  return true;
}

void RunLease::release() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor of the description drops the lock
  fd_ = -1;
}

bool RunLease::taken(const std::string& store_path, const std::string& run_id) {
  const int fd = ::open(lease_path(store_path).c_str(), O_RDONLY | O_CLOEXEC);
  // Every writer creates the file before it writes a run: no file, no live writer. Any other
  // failure to look counts as "taken", because a live run must never be declared dead.
  if (fd < 0) return errno != ENOENT;
  struct flock fl = lease_lock(F_WRLCK, run_id);
  const bool ok = ::fcntl(fd, F_OFD_GETLK, &fl) == 0;
  ::close(fd);
  return !ok || fl.l_type != F_UNLCK;
}

}  // namespace d9m
