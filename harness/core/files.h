// Files d9m reads as input (catalogues, baselines) and files it writes (reports, baselines,
// attestations, saved inputs and outputs). Inputs are read with limits, so a hostile or mistaken
// path (a folder, /dev/zero, a huge file) is a usage error and never a hang or a crash. Outputs
// are written whole or not at all, through a temporary file that no one else can have planted.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace d9m {

// The largest input file d9m reads: far above any real catalogue or baseline, far below memory.
inline constexpr std::size_t kMaxInputBytes = std::size_t{64} << 20;

// The whole of `path`; `what` names it in messages ("catalogue", "baseline"). A usage error
// (exit 2) naming the file when it cannot be opened, is a folder, or holds more than
// `max_bytes`: a regular file is measured before it is read, anything else (a pipe, a device)
// is read up to the limit and no further.
std::string read_input_file(const std::string& path, const std::string& what, std::size_t max_bytes = kMaxInputBytes);

// Writes `text` to `path` whole: into a new temporary file in the same folder (created with
// O_CREAT|O_EXCL|O_NOFOLLOW under a random name, so no planted file or symlink is ever opened),
// flushed to disk, then renamed over `path`. A reader sees the old file or the new one, never
// half of one. When `path` is a symlink, the link itself is replaced, not the file it points to.
// Throws Error(environment) naming `path` when it cannot be written; the temporary is removed.
void write_file_atomically(const std::string& path, const std::string& text);

// Writes all of `data` to `fd` (a file or a pipe), across short writes and EINTR; false with errno
// set when it cannot.
bool write_all(int fd, const char* data, std::size_t size);
inline bool write_all(int fd, const std::string& s) { return write_all(fd, s.data(), s.size()); }

// mkdir -p; throws Error(environment) naming the folder that could not be made.
void make_dirs(const std::string& path);

// mkdir -p of root/relative, where no folder below `root` may be a symbolic link: a link planted
// inside an output tree would send d9m's files somewhere else. `root` itself may be one (the
// user named it). Throws Error(environment) naming the link or the folder that could not be made.
void make_dirs_within(const std::string& root, const std::string& relative);
// The same check without making anything: every part of root/relative that exists is a real
// folder (not a link).
void check_no_links_within(const std::string& root, const std::string& relative);

// Checks, before any work is done, that write_file_atomically(path, ...) can succeed: the
// folder exists and accepts a new file, and `path` is not a folder. Throws Error(environment)
// naming the place. Writes nothing that stays (the folder is probed with a temporary file).
void check_output_file(const std::string& path);

// Checks that `path`, if it exists, is not a folder (which no file could be renamed over).
// Throws Error(environment) naming it.
void check_not_a_folder(const std::string& path);

// Checks that make_dirs(path) can succeed and that files can then be written in it: every
// part of `path` that exists is a folder, and the deepest existing one accepts a new file.
// Throws Error(environment) naming the place; creates nothing.
void check_output_folder(const std::string& path);

// Names that become one path component (config, op, variant and input names under
// --save-outputs): 1 to kMaxNameLength of A-Z a-z 0-9 _ . + -, not starting with '.' (so never
// "." or "..", nor a hidden file). Safe on every file system d9m runs on.
inline constexpr std::size_t kMaxNameLength = 100;
bool is_path_safe_name(std::string_view name);

// The name of a network file system type (statfs f_type): the store refuses WAL stores there, and
// the library versions cache caches nothing found there (a client may cache its attributes).
std::optional<std::string> network_filesystem_name(std::int64_t f_type);

// Whether anything (a file, a folder, a link's target) is at path.
bool path_exists(const std::string& path);
// The path with every link resolved (realpath), or the path as written where it cannot be.
std::string real_path_or_self(const std::string& path);
// The folder of a path as written: "." for a bare name, "/" for one at the root.
std::string parent_dir(const std::string& path);

}  // namespace d9m
