// A shared library's version as the dynamic loader would load it (the fingerprint's cuBLAS and
// cuSPARSE), answered from a cache where the cache is still right, so that a run does not load
// a library merely to read its version (docs/PERFORMANCE.md, "Start of a CUDA build": loading
// cuBLAS maps cuBLASLt's 600 MB and runs its initialisers, about 0.1 s of every run's start).
//
// Which file `dlopen(soname)` loads is decided by the directories the loader searches
// (`RTLD_DI_SERINFO`: LD_LIBRARY_PATH, the program's RUNPATH, the default ones), what each holds
// under that name (in the directory, its legacy hwcaps subdirectories and glibc-hwcaps levels: the
// name and what a symlink leads to), /etc/ld.so.cache and ld.so.preload, the environment that
// steers the loader (LD_PRELOAD, LD_AUDIT, GLIBC_TUNABLES) and the CPU's hwcaps; what version it
// reports, by that file. A cached answer is filed under a digest of all of those (device, inode,
// size, mtime and ctime of each file and directory) and holds the file it came from and every
// other file that load mapped (its dependencies), with their identities. Any change misses and
// loads the library as before; the answer is then cached again. Only the first soname's answer is
// cached (a later one loads only because the first failed, for a reason the digest cannot see);
// nothing found on a network file system (whose attributes a client may cache) is cached.
// A library the process has loaded already is asked directly: nothing is saved by a cache then.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace d9m {

// Where cached answers live (a store: Store::library_version_cache()). Either may be empty.
// `find` returns the entry `put` stored under (library, context), if any; neither may throw for
// an entry it cannot read or write (a cache that fails only costs the load it would have saved).
struct LibraryVersionCache {
  std::function<std::optional<std::string>(const std::string& library, const std::string& context)> find;
  std::function<void(const std::string& library, const std::string& context, const std::string& entry)> put;
};

struct LibraryQuery {
  std::string library;                                     // the cache's name for it: "cublas"
  std::vector<std::string> sonames;                        // tried in this order, as dlopen would be
  std::function<nlohmann::json(void* handle)> read;        // its version, or null when it cannot tell
  // An answer is not cached while the file, a directory searched or ld.so.cache changed less than
  // this long ago: a timestamp has the kernel's coarse granularity, so a second change within the
  // same tick would leave it as the cache saw it (git's "racy clean" entries).
  double settle_s = 2.0;
};

enum class VersionSource { already_loaded, cache, loaded, not_found };
const char* to_string(VersionSource s);

struct LibraryVersion {
  nlohmann::json version = nullptr;  // null when no soname loads or `read` cannot tell
  VersionSource source = VersionSource::not_found;
  std::string path;  // the file it came from; empty when not found
};

// The version of the first of q.sonames that loads. What it loads stays loaded (RTLD_NODELETE):
// the variants that call the library later find it mapped instead of loading it again.
LibraryVersion library_version(const LibraryQuery& q, const LibraryVersionCache* cache);

// The pieces, for tests.
// "dev:ino:size:mtime_ns:ctime_ns" of what `path` names (symlinks followed), "absent" otherwise.
std::string file_identity(const std::string& path);
// The directories dlopen searches from the main program, in order.
std::vector<std::string> loader_search_dirs();
// The digest a query's answer is filed under, from `dirs` (and their glibc-hwcaps subdirectories)
// and /etc/ld.so.cache as they are now; and the newest change among them (ctime, ns since 1970).
struct LoaderContext {
  std::string digest;
  long long newest_change_ns = 0;
  bool remote = false;  // a directory searched is on a network file system: no cache
};
LoaderContext loader_context(const std::vector<std::string>& sonames, const std::vector<std::string>& dirs);

}  // namespace d9m
