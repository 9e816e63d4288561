#include "harness/core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "harness/core/error.h"

namespace d9m {

namespace {

std::string why(int err) { return std::strerror(err); }

std::string size_text(std::size_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

// The folder of `path` and its last component ("a/b" -> "a", "b"; "b" -> ".", "b"; "/b" -> "/", "b").
std::string folder_of(const std::string& path) {
  const auto p = path.find_last_of('/');
  return p == std::string::npos ? "." : (p == 0 ? "/" : path.substr(0, p));
}
std::string name_of(const std::string& path) {
  const auto p = path.find_last_of('/');
  return p == std::string::npos ? path : path.substr(p + 1);
}

// The permissions a plain open(O_CREAT, 0666) would give: mkstemp makes 0600, but reports and
// saved outputs are meant to be read by others as any file the user writes. The umask is read
// from /proc (Linux 4.7+), never set: umask() is process-wide and would race other threads.
mode_t file_mode() {
  static const mode_t mode = [] {
    mode_t mask = 022;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Umask:", 0) == 0) mask = static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
    return static_cast<mode_t>(0666 & ~mask);
  }();
  return mode;
}

// A new, empty file beside `path` under a random name (".<name>.d9m-XXXXXX"): O_CREAT|O_EXCL
// (mkostemp) never opens a file that exists, and with O_NOFOLLOW never follows a symlink, so
// nothing planted at a predictable name can be written through. Returns -1 with errno set.
int create_temporary(const std::string& path, std::string& tmp) {
  // Keep the temporary's name within NAME_MAX (255) however long the target's is.
  const std::string name = name_of(path).substr(0, 200);
  std::vector<char> templ;
  const std::string t = folder_of(path) + "/." + name + ".d9m-XXXXXX";
  templ.assign(t.begin(), t.end());
  templ.push_back('\0');
  const int fd = ::mkostemp(templ.data(), O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) tmp.assign(templ.data());
  return fd;
}

// That a new file can be made in `folder` (permissions, a read-only or full file system):
// made and removed at once.
void probe_folder(const std::string& folder, const std::string& for_path) {
  std::string tmp;
  const int fd = create_temporary(folder + "/probe", tmp);
  if (fd < 0) fail_environment(for_path + ": cannot write in folder " + folder + " (" + why(errno) + ")");
  ::close(fd);
  ::unlink(tmp.c_str());
}

}  // namespace

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string read_input_file(const std::string& path, const std::string& what, std::size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_usage(path + ": cannot read the " + what + " (" + why(errno) + ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail_usage(path + ": cannot read the " + what + " (" + why(errno) + ")");
  if (S_ISDIR(st.st_mode)) fail_usage(path + ": is a folder, not a " + what + " file");
  const std::string limit = "larger than the limit of " + size_text(max_bytes) + " for a " + what;
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > max_bytes)
    fail_usage(path + ": " + std::to_string(st.st_size) + " bytes, " + limit);
  std::string text;
  // A regular file by its size; anything else grows as it is read, one byte past the limit at most.
  text.reserve(S_ISREG(st.st_mode) ? static_cast<std::size_t>(st.st_size) : 0);
  char buf[65536];
  while (text.size() <= max_bytes) {
    const std::size_t want = std::min(sizeof buf, max_bytes + 1 - text.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_usage(path + ": cannot read the " + what + " (" + why(errno) + ")");
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
  }
  fail_usage(path + ": " + limit + " (read stopped there)");
}

namespace {

// Whether `path` itself is a character device (/dev/null, a terminal): one to write into, never to
// replace. Renaming a new file over it put a regular file where /dev/null was (`-o /dev/null` run
// as root: found when a test then read text from /dev/null). A link or a FIFO at the target is
// still replaced, as before: writing through a planted link could reach another file, and opening
// a FIFO with no reader would block.
bool is_special_file(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  if (is_special_file(path)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail_environment(path + ": cannot write (" + why(errno) + ")");
    int err = write_all(fd, text.data(), text.size()) ? 0 : errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) fail_environment(path + ": cannot write (" + why(err) + ")");
    return;
  }
  std::string tmp;
  const int fd = create_temporary(path, tmp);
  if (fd < 0) fail_environment(path + ": cannot write (" + why(errno) + ")");
  int err = 0;
  // fsync before the rename: after a crash the name holds the old file or the whole new one,
  // never an empty one (the rename can reach the disk before the data otherwise).
  if (::fchmod(fd, file_mode()) != 0 || !write_all(fd, text.data(), text.size()) || ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());  // ours: created above with O_EXCL
    fail_environment(path + ": cannot write (" + why(err) + ")");
  }
  // The rename itself, on disk. Not every file system can sync a folder; the file is complete
  // either way, so a failure here is not one of the write.
  if (const int dir = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

void make_dirs(const std::string& path) {
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST)
      fail_environment(partial + ": cannot create folder (" + why(errno) + ")");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail_environment(path + ": not a folder");
}

void check_no_links_within(const std::string& root, const std::string& relative) {
  std::string at = root;
  std::size_t from = 0;
  while (from <= relative.size()) {
    const std::size_t slash = std::min(relative.find('/', from), relative.size());
    at += "/" + relative.substr(from, slash - from);
    from = slash + 1;
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) return;  // from here on nothing exists yet
    if (S_ISLNK(st.st_mode))
      fail_environment(at + ": is a symbolic link inside the output folder " + root +
                       "; d9m writes only into folders it finds or makes there, so that nothing lands elsewhere");
  }
}

void make_dirs_within(const std::string& root, const std::string& relative) {
  check_no_links_within(root, relative);
  make_dirs(root + "/" + relative);
  // A link made between the check and the mkdir: mkdir follows nothing it creates, so one made
  // meanwhile is seen here.
  check_no_links_within(root, relative);
}

void check_not_a_folder(const std::string& path) {
  struct stat st {};
  if (path.empty() || path.back() == '/' || (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
    fail_environment(path + ": is a folder, not a file to write");
}

void check_output_file(const std::string& path) {
  check_not_a_folder(path);
  if (is_special_file(path)) {  // written into (write_file_atomically): its folder is not written
    if (::access(path.c_str(), W_OK) != 0) fail_environment(path + ": cannot write (" + why(errno) + ")");
    return;
  }
  struct stat st {};
  const std::string folder = folder_of(path);
  if (::stat(folder.c_str(), &st) != 0) fail_environment(path + ": cannot write: folder " + folder + " (" + why(errno) + ")");
  if (!S_ISDIR(st.st_mode)) fail_environment(path + ": cannot write: " + folder + " is not a folder");
  probe_folder(folder, path);
}

void check_output_folder(const std::string& path) {
  // The deepest part of `path` that exists: what is below it, make_dirs creates.
  std::string existing = path;
  struct stat st {};
  while (::stat(existing.c_str(), &st) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) fail_environment(path + ": cannot create folder: " + existing + " (" + why(errno) + ")");
    const std::string up = folder_of(existing);
    if (up == existing) fail_environment(path + ": cannot create folder: " + existing + " (" + why(errno) + ")");
    existing = up;
  }
  if (!S_ISDIR(st.st_mode))
    fail_environment(path + ": cannot create folder: " + (existing == path ? "it" : existing) + " is a file, not a folder");
  probe_folder(existing, path);
}

bool is_path_safe_name(std::string_view n) {
  return !n.empty() && n.size() <= kMaxNameLength && n.front() != '.' && std::all_of(n.begin(), n.end(), [](char ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
           ch == '+' || ch == '-';
  });
}

std::optional<std::string> network_filesystem_name(std::int64_t f_type) {
  switch (static_cast<std::uint32_t>(f_type)) {
    case 0x6969: return "NFS";
    case 0x517b: return "SMB";
    case 0xff534d42: return "CIFS";
    case 0xfe534d42: return "SMB2";
    case 0x564c: return "NCP";
    case 0x5346414f: return "AFS";
    case 0x6b414653: return "AFS (kAFS)";
    case 0x00c36400: return "CephFS";
    case 0x0bd00bd0: return "Lustre";
    case 0x47504653: return "GPFS";
    case 0x01021997: return "9p";
    case 0x013111a8: return "IBRIX";
    case 0x19830326: return "FhGFS/BeeGFS";
    case 0x65735546: return std::nullopt;  // FUSE: local or remote, cannot tell
    default: return std::nullopt;
  }
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string real_path_or_self(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return path;
  std::string out(real);
  std::free(real);
  return out;
}

std::string parent_dir(const std::string& path) {
  const auto p = path.find_last_of('/');
  return p == std::string::npos ? "." : (p == 0 ? "/" : path.substr(0, p));
}

}  // namespace d9m
