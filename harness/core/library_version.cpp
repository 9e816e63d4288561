#include "harness/core/library_version.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include "harness/core/digest.h"
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
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return "absent";
  return identity_of(st);
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

LoaderContext loader_context(const std::vector<std::string>& sonames, const std::vector<std::string>& dirs) {
  LoaderContext c;
  json searched = json::array();
  for (const std::string& dir : dirs) {
    json d = {dir, identity_noting(dir, c.newest_change_ns)};
    // glibc 2.33+ looks in <dir>/glibc-hwcaps/<level>/ first, which RTLD_DI_SERINFO does not list.
    const std::string hwcaps = dir + "/glibc-hwcaps";
    if (DIR* h = ::opendir(hwcaps.c_str())) {
      std::vector<std::string> levels;
      while (const dirent* e = ::readdir(h))
        if (e->d_name[0] != '.') levels.emplace_back(e->d_name);
      ::closedir(h);
      std::sort(levels.begin(), levels.end());
      d.push_back(identity_noting(hwcaps, c.newest_change_ns));
      for (const std::string& level : levels) d.push_back({level, identity_noting(hwcaps + "/" + level, c.newest_change_ns)});
    }
    searched.push_back(d);
  }
  const std::string ld_so_cache = identity_noting("/etc/ld.so.cache", c.newest_change_ns);
  c.digest = sha256_hex(
      json_text(json{{"schema", "d9m.loader-context/1"}, {"sonames", sonames}, {"searched", searched}, {"ld.so.cache", ld_so_cache}}));
  return c;
}

namespace {

// The entry as cached: which soname loaded, from which file (and that file's identity), and the
// version read from it. Anything else (an old or edited row) is not an answer.
std::optional<LibraryVersion> cached(const LibraryQuery& q, const std::string& entry_text) {
  try {
    const json e = json::parse(entry_text);
    const std::string soname = e.at("soname").get<std::string>(), path = e.at("path").get<std::string>();
    const std::string file = e.at("file").get<std::string>();
    if (std::find(q.sonames.begin(), q.sonames.end(), soname) == q.sonames.end()) return std::nullopt;
    if (file == "absent" || file_identity(path) != file) return std::nullopt;
    const json& version = e.at("version");
    if (!version.is_string()) return std::nullopt;
    return LibraryVersion{version, VersionSource::cache, path};
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string loaded_path(void* handle) {
  link_map* map = nullptr;
  return dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name ? std::string(map->l_name) : std::string();
}

// Whether the process has `path`'s file mapped, by inode and the name the kernel gives it: a file
// replaced between the load and the stat that files its identity is not cached under the new
// file's identity with the old one's version.
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
    unsigned dev_major = 0, dev_minor = 0;
    if (std::sscanf(dev.c_str(), "%x:%x", &dev_major, &dev_minor) != 2) continue;
    if (inode == static_cast<unsigned long long>(st.st_ino) && dev_major == major(st.st_dev) && dev_minor == minor(st.st_dev) &&
        mapped_name == name)
      return true;
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
  // Loaded already (a variant ran, or the process linked it): ask it, as before there was a cache.
  for (const std::string& name : q.sonames)
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return read_loaded(q, h, VersionSource::already_loaded);

  const std::vector<std::string> dirs = loader_search_dirs();
  // Without the search list the loader's choice cannot be checked: no cache then.
  const LoaderContext context = dirs.empty() ? LoaderContext{} : loader_context(q.sonames, dirs);
  const bool use_cache = cache && !context.digest.empty();
  if (use_cache && cache->find)
    if (const std::optional<std::string> entry = cache->find(q.library, context.digest))
      if (std::optional<LibraryVersion> hit = cached(q, *entry)) return *hit;

  for (const std::string& name : q.sonames) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) continue;
    LibraryVersion v = read_loaded(q, h, VersionSource::loaded);
    struct stat st {};
    if (use_cache && cache->put && v.version.is_string() && !v.path.empty() && ::stat(v.path.c_str(), &st) == 0 && mapped(v.path, st) &&
        now_ns() - std::max(context.newest_change_ns, ns(st.st_ctim)) >= static_cast<long long>(q.settle_s * 1e9))
      cache->put(q.library, context.digest,
                 json_text(json{{"soname", name}, {"path", v.path}, {"file", identity_of(st)}, {"version", v.version}}));
    return v;
  }
  return {};
}

}  // namespace d9m
