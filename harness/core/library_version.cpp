#include "harness/core/library_version.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/auxv.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "harness/core/digest.h"
#include "harness/core/files.h"
#include "harness/core/json_text.h"

namespace d9m {

using nlohmann::json;

const char* to_string(VersionSource s) {
  switch (s) {
    case VersionSource::already_loaded: return "already loaded";
    case VersionSource::cache: return "cache";
    case VersionSource::loaded: return "loaded";
    case VersionSource::not_found: return "not found";
  }
  return "?";
}

namespace {
long long ns(const timespec& t) { return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec; }
std::string identity_of(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(ns(st.st_mtim)) + ":" + std::to_string(ns(st.st_ctim));
}
// file_identity, noting the newest change seen.
std::string identity_noting(const std::string& path, long long& newest) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return "absent";
  newest = std::max(newest, ns(st.st_ctim));
  return identity_of(st);
}
long long now_ns() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return ns(t);
}
}  // namespace

std::string file_identity(const std::string& path) {
  long long unused = 0;
  return identity_noting(path, unused);
}

std::vector<std::string> loader_search_dirs() {
  std::vector<std::string> dirs;
  void* self = dlopen(nullptr, RTLD_LAZY);
  if (!self) return dirs;
  Dl_serinfo size{};
  if (dlinfo(self, RTLD_DI_SERINFOSIZE, &size) == 0 && size.dls_size >= sizeof(Dl_serinfo)) {
    // Dl_serinfo ends in a flexible array: glibc fills a buffer of the size it asked for.
    std::unique_ptr<unsigned char[]> buffer(new unsigned char[size.dls_size]);
    auto* info = reinterpret_cast<Dl_serinfo*>(buffer.get());
    info->dls_size = size.dls_size;
    info->dls_cnt = size.dls_cnt;
    if (dlinfo(self, RTLD_DI_SERINFO, info) == 0)
      for (unsigned i = 0; i < info->dls_cnt; ++i) dirs.emplace_back(info->dls_serpath[i].dls_name);
  }
  dlclose(self);
  return dirs;
}

namespace {

// Where a loader may look for a soname in one directory besides the directory itself: glibc
// before 2.37 still searches the legacy hwcaps subdirectories, which RTLD_DI_SERINFO does not
// list: an optional tls/, then a platform (AT_PLATFORM, or haswell or xeon_phi where glibc picks
// them), then the capability names in order (avx512_1, x86_64). Every such path, whether or not
// this CPU would use it. (The glibc-hwcaps levels are read from the directory.)
std::vector<std::string> legacy_subdirs() {
  std::vector<std::string> subs;
  for (const char* tls : {"", "tls/"})
    for (const char* platform : {"", "x86_64/", "haswell/", "xeon_phi/"})
      for (const char* caps : {"", "avx512_1/", "x86_64/", "avx512_1/x86_64/"}) {
        std::string sub = std::string(tls) + platform + caps;
        if (sub.empty()) continue;
        sub.pop_back();
        subs.push_back(sub);
      }
  return subs;
}

// The CPU's feature bits that glibc's hwcaps levels (x86-64-v2, v3, v4) are chosen by: CPUID
// leaves 1, 7 and 0x80000001 (a store copied to a machine with another CPU level).
json cpu_feature_bits() {
  json bits = json::array();
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) bits.push_back({c, d});
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) bits.push_back({b, c, d});
  if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) bits.push_back({c, d});
#endif
  return bits;
}

// A candidate file as the loader would meet it: the name itself (lstat: a symlink and what it
// says) and what it leads to (stat: a target that appears, vanishes or changes), with its mode.
json candidate(const std::string& path, long long& newest) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) return "absent";
  newest = std::max(newest, ns(link.st_ctim));
  std::string target = identity_of(link);
  if (S_ISLNK(link.st_mode)) {
    char to[4096];
    const ssize_t n = ::readlink(path.c_str(), to, sizeof to);
    target = identity_noting(path, newest) + " <- " + (n > 0 ? std::string(to, static_cast<std::size_t>(n)) : std::string("?"));
  }
  return json::array({identity_of(link), target, static_cast<int>(link.st_mode & 07777)});
}

json env(const char* name) {
  const char* v = std::getenv(name);
  return v ? json(v) : json(nullptr);
}

// File systems whose attributes a client may cache (NFS for up to a minute): a stat there can be
// older than what open() sees, so nothing found there is cached. The store's list, and FUSE
// (which may be either).
bool on_remote_fs(const std::string& path) {
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return false;
  const auto type = static_cast<std::int64_t>(fs.f_type);
  return network_filesystem_name(type).has_value() || static_cast<std::uint32_t>(type) == 0x65735546u;
}

}  // namespace

LoaderContext loader_context(const std::vector<std::string>& sonames, const std::vector<std::string>& dirs) {
  LoaderContext c;
  // The first soname decides: an answer is cached only when it is the one that loaded.
  const std::string soname = sonames.empty() ? std::string() : sonames.front();
  static const std::vector<std::string> subdirs = legacy_subdirs();
  json searched = json::array();
  for (const std::string& dir : dirs) {
    c.remote = c.remote || on_remote_fs(dir);
    json d = {dir, identity_noting(dir, c.newest_change_ns), candidate(dir + "/" + soname, c.newest_change_ns)};
    for (const std::string& sub : subdirs) d.push_back(candidate(dir + "/" + sub + "/" + soname, c.newest_change_ns));
    // glibc 2.33+ looks in <dir>/glibc-hwcaps/<level>/ first: the levels it knows, and any the
    // directory holds. (The folder itself as the loader meets it: a symlink, even a dangling one.)
    const std::string hwcaps = dir + "/glibc-hwcaps";
    d.push_back(candidate(hwcaps, c.newest_change_ns));
    std::vector<std::string> levels = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
    if (DIR* h = ::opendir(hwcaps.c_str())) {
      while (const dirent* e = ::readdir(h))
        if (e->d_name[0] != '.') levels.emplace_back(e->d_name);
      ::closedir(h);
    }
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    for (const std::string& level : levels)
      d.push_back({level, candidate(hwcaps + "/" + level, c.newest_change_ns), candidate(hwcaps + "/" + level + "/" + soname, c.newest_change_ns)});
    searched.push_back(d);
  }
  const char* platform = reinterpret_cast<const char*>(getauxval(AT_PLATFORM));
  c.digest = sha256_hex(json_text(json{
      {"schema", "d9m.loader-context/2"},
      {"sonames", sonames},
      {"searched", searched},
      {"ld.so.cache", identity_noting("/etc/ld.so.cache", c.newest_change_ns)},
      {"ld.so.preload", identity_noting("/etc/ld.so.preload", c.newest_change_ns)},
      // What else steers the loader: preloads and auditors, tunables that mask hwcaps levels, and
      // the CPU the levels are chosen for (a store copied to another machine).
      {"environment", {env("LD_LIBRARY_PATH"), env("LD_PRELOAD"), env("LD_AUDIT"), env("GLIBC_TUNABLES"), env("LD_HWCAP_MASK")}},
      {"cpu", {platform ? json(platform) : json(nullptr), getauxval(AT_HWCAP), getauxval(AT_HWCAP2), cpu_feature_bits()}}}));
  return c;
}

namespace {

// The objects the process has mapped, by the loader's names for them.
std::set<std::string> loaded_objects() {
  std::set<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        return 0;
      },
      &names);
  return names;
}

// The entry as cached: the first soname, loaded from which file (and that file's identity), every
// other file that load mapped (its dependencies, with theirs), and the version read. Anything else
// (an old or edited row) is not an answer.
std::optional<LibraryVersion> cached(const LibraryQuery& q, const std::string& entry_text) {
  const json e = parse_stored_json(entry_text);
  if (!e.is_object() || q.sonames.empty()) return std::nullopt;
  const auto text = [&](const char* key) -> std::optional<std::string> {
    const auto it = e.find(key);
    if (it == e.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  const auto soname = text("soname"), path = text("path"), file = text("file"), version = text("version");
  if (!soname || !path || !file || !version || *soname != q.sonames.front()) return std::nullopt;
  if (*file == "absent" || file_identity(*path) != *file) return std::nullopt;
  const auto deps = e.find("mapped");
  if (deps == e.end() || !deps->is_array()) return std::nullopt;
  for (const json& d : *deps) {
    if (!d.is_array() || d.size() != 2 || !d[0].is_string() || !d[1].is_string()) return std::nullopt;
    const std::string identity = d[1].get<std::string>();
    if (identity == "absent" || file_identity(d[0].get<std::string>()) != identity) return std::nullopt;
  }
  return LibraryVersion{*version, VersionSource::cache, *path};
}

std::string loaded_path(void* handle) {
  link_map* map = nullptr;
  return dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? std::string(map->l_name) : std::string();
}

// Whether the process has `path`'s file mapped, by inode and the name the kernel gives it: a file
// replaced between the load and the stat that files its identity is not cached under the new
// file's identity with the old one's version. (Not by device: overlayfs and btrfs name another
// device in the mappings than stat does.)
bool mapped(const std::string& path, const struct stat& st) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return false;
  const std::string name = real;
  std::free(real);
  std::ifstream maps("/proc/self/maps");
  // address perms offset dev inode pathname
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::string address, perms, offset, dev, mapped_name;
    unsigned long long inode = 0;
    if (!(in >> address >> perms >> offset >> dev >> inode)) continue;
    std::getline(in >> std::ws, mapped_name);
    if (inode == static_cast<unsigned long long>(st.st_ino) && mapped_name == name) return true;
  }
  return false;
}

LibraryVersion read_loaded(const LibraryQuery& q, void* handle, VersionSource source) {
  LibraryVersion v{q.read ? q.read(handle) : json(nullptr), source, loaded_path(handle)};
  dlclose(handle);  // RTLD_NODELETE (or loaded before): it stays mapped
  return v;
}

}  // namespace

LibraryVersion library_version(const LibraryQuery& q, const LibraryVersionCache* cache) {
  if (q.sonames.empty()) return {};
  // The first soname loaded already (a variant ran, or the process linked it): ask it. (A later
  // one loaded already is not the answer if the first would load: the loop below finds which.)
  if (void* h = dlopen(q.sonames.front().c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD))
    return read_loaded(q, h, VersionSource::already_loaded);

  const std::vector<std::string> dirs = loader_search_dirs();
  // Without the search list the loader's choice cannot be checked: no cache then.
  const LoaderContext context = dirs.empty() ? LoaderContext{} : loader_context(q.sonames, dirs);
  const bool use_cache = cache && !context.digest.empty() && !context.remote;
  if (use_cache && cache->find)
    if (const std::optional<std::string> entry = cache->find(q.library, context.digest))
      if (std::optional<LibraryVersion> hit = cached(q, *entry)) return *hit;

  const std::set<std::string> before = use_cache ? loaded_objects() : std::set<std::string>{};
  for (std::size_t i = 0; i < q.sonames.size(); ++i) {
    void* h = dlopen(q.sonames[i].c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) continue;
    LibraryVersion v = read_loaded(q, h, VersionSource::loaded);
    // Cached only when the first soname loaded: a later one answers only because the first failed,
    // and why (absent, unreadable, a dependency missing, out of memory) the context cannot say.
    struct stat st {};
    if (!use_cache || !cache->put || i != 0 || !v.version.is_string() || v.path.empty() || ::stat(v.path.c_str(), &st) != 0 ||
        !mapped(v.path, st) || on_remote_fs(v.path))
      return v;
    long long newest = std::max(context.newest_change_ns, ns(st.st_ctim));
    json deps = json::array();
    for (const std::string& name : loaded_objects())
      if (!before.count(name) && name != v.path) deps.push_back({name, identity_noting(name, newest)});
    if (now_ns() - newest >= static_cast<long long>(q.settle_s * 1e9))
      cache->put(q.library, context.digest,
                 json_text(json{{"soname", q.sonames[i]}, {"path", v.path}, {"file", identity_of(st)}, {"mapped", deps}, {"version", v.version}}));
    return v;
  }
  return {};
}

}  // namespace d9m
