// The cache of library versions a fingerprint reads (harness/core/library_version.h): an answer
// comes from the cache without loading the library only while the file and what decides the
// loader's choice are as they were; anything else loads the library, as without a cache. Uses a
// copy of the system's zlib (zlibVersion() is its version), loaded by path so that each test
// loads a file no other part of the process has, or by name through LD_LIBRARY_PATH in a child
// process started with it (the loader reads it once, at start).
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "harness/core/library_version.h"
#include "harness/store/store.h"
#include "harness/store/verify.h"
#include "suites/unit/scratch_dir.h"

extern char** environ;

namespace d9m {
namespace {

namespace fs = std::filesystem;

const char* kZlib = "/lib/x86_64-linux-gnu/libz.so.1";

// A cache in a file, so that what a child process puts there reaches the parent.
struct FileCache {
  std::string path;
  std::map<std::string, std::string> read() const {
    std::map<std::string, std::string> m;
    std::ifstream in(path);
    for (std::string key, entry; std::getline(in, key) && std::getline(in, entry);) m[key] = entry;
    return m;
  }
  void write(const std::map<std::string, std::string>& m) const {
    std::ofstream out(path, std::ios::trunc);
    for (const auto& [key, entry] : m) out << key << "\n" << entry << "\n";
  }
  LibraryVersionCache cache() const {
    LibraryVersionCache c;
    c.find = [this](const std::string& library, const std::string& context) -> std::optional<std::string> {
      const auto m = read();
      const auto it = m.find(library + " " + context);
      if (it == m.end()) return std::nullopt;
      return it->second;
    };
    c.put = [this](const std::string& library, const std::string& context, const std::string& entry) {
      auto m = read();
      m[library + " " + context] = entry;
      write(m);
    };
    return c;
  }
};

class LibraryVersionTest : public test::ScratchDirTest {
 protected:
  LibraryVersionTest() : ScratchDirTest("libversion") {}
  void SetUp() override {
    ScratchDirTest::SetUp();
    if (!fs::exists(kZlib)) GTEST_SKIP() << kZlib << " is not here";
    lib_ = path("libz-copy.so.1");
    fs::copy_file(kZlib, lib_);
    cache_.path = path("cache.txt");
  }
  LibraryQuery query(double settle_s = 0) const {
    LibraryQuery q;
    q.library = "zlib";
    q.sonames = {lib_};
    q.read = [](void* handle) -> nlohmann::json {
      auto version = reinterpret_cast<const char* (*)()>(dlsym(handle, "zlibVersion"));
      return version ? nlohmann::json(version()) : nlohmann::json(nullptr);
    };
    q.settle_s = settle_s;
    return q;
  }
  bool loaded() const {
    void* h = dlopen(lib_.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h) dlclose(h);
    return h != nullptr;
  }
  // Runs library_version in a child process (which loads the copy, not this one); its source.
  VersionSource in_child(const LibraryQuery& q) const {
    const pid_t pid = fork();
    if (pid == 0) {
      const LibraryVersionCache c = cache_.cache();
      std::_Exit(static_cast<int>(library_version(q, &c).source));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return static_cast<VersionSource>(WIFEXITED(status) ? WEXITSTATUS(status) : 99);
  }
  std::string lib_;
  FileCache cache_;
};

TEST_F(LibraryVersionTest, AnswersFromTheCacheWithoutLoadingWhileTheFileIsTheSame) {
  ASSERT_EQ(in_child(query()), VersionSource::loaded) << "an empty cache: the child loads the library";
  ASSERT_EQ(cache_.read().size(), 1u);
  ASSERT_EQ(in_child(query()), VersionSource::cache);

  const LibraryVersionCache c = cache_.cache();
  const LibraryVersion v = library_version(query(), &c);
  EXPECT_EQ(v.source, VersionSource::cache);
  EXPECT_EQ(v.path, lib_);
  EXPECT_FALSE(loaded()) << "answered from the cache, yet the library was loaded";
  ASSERT_TRUE(v.version.is_string());

  // The same answer as the library gives, loaded: then asked directly, the cache not consulted.
  FileCache empty{path("empty.txt")};
  const LibraryVersionCache none = empty.cache();
  const LibraryVersion fresh = library_version(query(), &none);
  EXPECT_EQ(fresh.source, VersionSource::loaded);
  EXPECT_EQ(fresh.version, v.version);
  EXPECT_TRUE(loaded());
  EXPECT_EQ(library_version(query(), &c).source, VersionSource::already_loaded);
}

TEST_F(LibraryVersionTest, AChangedFileIsLoadedAgain) {
  ASSERT_EQ(in_child(query()), VersionSource::loaded);
  ASSERT_EQ(in_child(query()), VersionSource::cache);
  // Its times set back to what they were: the change of inode (a copy put in place) still shows.
  struct stat before {};
  ASSERT_EQ(::stat(lib_.c_str(), &before), 0);
  fs::copy_file(kZlib, lib_ + ".new");
  fs::rename(lib_ + ".new", lib_);
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, lib_.c_str(), times, 0), 0);
  EXPECT_EQ(in_child(query()), VersionSource::loaded);
  EXPECT_EQ(in_child(query()), VersionSource::cache) << "cached again, under the new file";
  // Touched in place (same inode): loaded again.
  ASSERT_EQ(::utimensat(AT_FDCWD, lib_.c_str(), nullptr, 0), 0);
  EXPECT_EQ(in_child(query()), VersionSource::loaded);
}

TEST_F(LibraryVersionTest, AnEditedOrForeignEntryIsNoAnswer) {
  ASSERT_EQ(in_child(query()), VersionSource::loaded);
  const auto good = cache_.read();
  ASSERT_EQ(good.size(), 1u);
  const std::string key = good.begin()->first, entry = good.begin()->second;
  auto with = [&](const std::string& e) { cache_.write({{key, e}}); };
  const auto edited = [&](const std::string& field, const nlohmann::json& value) {
    nlohmann::json e = nlohmann::json::parse(entry);
    e[field] = value;
    return e.dump();
  };
  for (const std::string& bad : {std::string("not json"), std::string("{}"), std::string("[1, 2]"), edited("soname", "libother.so.1"),
                                 edited("path", kZlib), edited("file", "absent"), edited("file", "1:2:3:4:5"),
                                 edited("version", nullptr), edited("version", 7)}) {
    with(bad);
    EXPECT_EQ(in_child(query()), VersionSource::loaded) << bad;
  }
  with(entry);
  EXPECT_EQ(in_child(query()), VersionSource::cache);
}

TEST_F(LibraryVersionTest, AFileThatChangedMomentsAgoIsNotCached) {
  EXPECT_EQ(in_child(query(/*settle_s=*/3600)), VersionSource::loaded);
  EXPECT_TRUE(cache_.read().empty()) << "cached an answer from a file whose timestamps cannot yet be trusted";
}

TEST_F(LibraryVersionTest, ALaterSonameIsAnsweredButNotCached) {
  LibraryQuery q = query();
  q.sonames = {path("not-there.so.1"), lib_};
  EXPECT_EQ(in_child(q), VersionSource::loaded);
  EXPECT_TRUE(cache_.read().empty()) << "cached the answer of a soname that loaded only because the first did not";
}

// A later soname loaded already is not the answer while the first would load (as before the
// cache: the first soname that loads wins).
TEST_F(LibraryVersionTest, TheFirstSonameThatLoadsWinsOverALaterOneLoadedAlready) {
  const std::string later = path("libz-later.so.1");
  fs::copy_file(kZlib, later);
  void* h = dlopen(later.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr);
  LibraryQuery q = query();
  q.sonames = {lib_, later};
  const LibraryVersion v = library_version(q, nullptr);
  EXPECT_EQ(v.source, VersionSource::loaded);
  EXPECT_EQ(v.path, lib_);
  dlclose(h);
}

TEST_F(LibraryVersionTest, NoSonameThatLoadsIsNotFound) {
  LibraryQuery q = query();
  q.sonames = {path("none.so.1"), "libd9m-no-such-library.so.7"};
  const LibraryVersionCache c = cache_.cache();
  const LibraryVersion v = library_version(q, &c);
  EXPECT_EQ(v.source, VersionSource::not_found);
  EXPECT_TRUE(v.version.is_null());
  EXPECT_TRUE(cache_.read().empty());
}

// What decides the loader's choice: an entry added to, renamed in or removed from a directory it
// searches, or to one of their glibc-hwcaps levels, changes the context the answer is filed under.
TEST_F(LibraryVersionTest, TheContextChangesWithEveryDirectoryTheLoaderSearches) {
  const std::string a = path("a"), b = path("b");
  fs::create_directories(a);
  fs::create_directories(b);
  struct stat st {};
  ASSERT_EQ(::stat(a.c_str(), &st), 0);
  if (st.st_mtim.tv_nsec == 0) GTEST_SKIP() << "timestamps of whole seconds here: 20 ms apart, changes would not show";
  const std::vector<std::string> dirs = {a, b};
  const std::vector<std::string> sonames = {"libx.so.1"};
  std::vector<std::string> seen = {loader_context(sonames, dirs).digest};
  EXPECT_EQ(loader_context(sonames, dirs).digest, seen.back()) << "the same directories, another context";
  auto changes = [&](const std::string& what) {
    // Coarse timestamps: a change in the same tick as the last one would not show (which is why
    // answers are not cached for settle_s after a change).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const std::string now = loader_context(sonames, dirs).digest;
    for (const std::string& before : seen) EXPECT_NE(now, before) << what;
    seen.push_back(now);
  };
  std::ofstream(b + "/libx.so.1").put('x');
  changes("a file added to the second directory");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::rename(b + "/libx.so.1", b + "/libx.so.1.0");
  changes("a file renamed");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::create_directories(a + "/glibc-hwcaps/x86-64-v3");
  changes("a glibc-hwcaps level added");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(a + "/glibc-hwcaps/x86-64-v3/libx.so.1").put('x');
  changes("a file added to a glibc-hwcaps level");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::remove(b + "/libx.so.1.0");
  changes("a file removed");
  // The legacy hwcaps subdirectories glibc 2.36 searches, x86_64/x86_64 among them: a file
  // appearing in one that exists already changes neither searched directory.
  fs::create_directories(a + "/x86_64/x86_64");
  fs::create_directories(b + "/tls/haswell/avx512_1");
  changes("legacy subdirectories made");
  std::ofstream(a + "/x86_64/x86_64/libx.so.1").put('x');
  changes("a file in x86_64/x86_64");
  std::ofstream(b + "/tls/haswell/avx512_1/libx.so.1").put('x');
  changes("a file in tls/haswell/avx512_1");
  EXPECT_NE(loader_context({"liby.so.1"}, dirs).digest, seen.back()) << "another soname, the same context";
  EXPECT_NE(loader_context(sonames, {b, a}).digest, seen.back()) << "the directories in another order, the same context";
  EXPECT_NE(loader_context(sonames, {a}).digest, seen.back()) << "a directory fewer, the same context";
}

// By name, as d9m asks for cuBLAS: this test's executable started again with LD_LIBRARY_PATH=A:B
// (what the loader searches is fixed at a process's start), running only the test below, which
// answers through the cache file and writes what it found.
TEST(LibraryVersionChild, AnswerByName) {
  const char* cache_file = std::getenv("D9M_LIBVERSION_CACHE");
  const char* out = std::getenv("D9M_LIBVERSION_OUT");
  if (!cache_file || !out) GTEST_SKIP() << "run by LibraryVersionTest.ByNameThroughTheSearchPath";
  FileCache file{cache_file};
  const LibraryVersionCache c = file.cache();
  LibraryQuery q;
  q.library = "zlib";
  q.sonames = {"libd9mtestz.so.1"};
  q.read = [](void* handle) -> nlohmann::json {
    auto version = reinterpret_cast<const char* (*)()>(dlsym(handle, "zlibVersion"));
    return version ? nlohmann::json(version()) : nlohmann::json(nullptr);
  };
  q.settle_s = 0;
  const LibraryVersion v = library_version(q, &c);
  std::ofstream(out) << to_string(v.source) << "\n" << v.path << "\n";
}

TEST_F(LibraryVersionTest, ByNameThroughTheSearchPath) {
  const std::string a = path("A"), b = path("B"), elsewhere = path("T");
  for (const auto& d : {a, b, elsewhere}) fs::create_directories(d);
  fs::copy_file(kZlib, b + "/libd9mtestz.so.1");
  const char* old_path = std::getenv("LD_LIBRARY_PATH");
  auto child = [&](const std::string& search) {
    const std::string out = path("out.txt");
    fs::remove(out);
    std::vector<std::string> env = {"D9M_LIBVERSION_CACHE=" + cache_.path, "D9M_LIBVERSION_OUT=" + out,
                                    "LD_LIBRARY_PATH=" + search + (old_path && *old_path ? ":" + std::string(old_path) : "")};
    // Not the parent's gtest settings (a shard of the parent's might run nothing in the child).
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("LD_LIBRARY_PATH=", 0) != 0 && std::string(*e).rfind("GTEST_", 0) != 0) env.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string exe = fs::read_symlink("/proc/self/exe").string(), filter = "--gtest_filter=LibraryVersionChild.AnswerByName";
    char* argv[] = {exe.data(), filter.data(), nullptr};
    pid_t pid = -1;
    if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0 || pid <= 0) {
      ADD_FAILURE() << "cannot start " << exe;
      return std::string("not started");
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::ifstream in(out);
    std::string source, found;
    std::getline(in, source);
    std::getline(in, found);
    return source + " " + found;
  };
  const std::string search = a + ":" + b;
  EXPECT_EQ(child(search), "loaded " + b + "/libd9mtestz.so.1");
  EXPECT_EQ(child(search), "cache " + b + "/libd9mtestz.so.1");
  // Another search path (B alone): another context, loaded.
  EXPECT_EQ(child(b), "loaded " + b + "/libd9mtestz.so.1");
  // A symlink in A to a file that is not there: the loader passes it by, but it is noted.
  fs::create_symlink(elsewhere + "/libd9mtestz.so.1", a + "/libd9mtestz.so.1");
  EXPECT_EQ(child(search), "loaded " + b + "/libd9mtestz.so.1");
  EXPECT_EQ(child(search), "cache " + b + "/libd9mtestz.so.1");
  // Its target appears, in a directory the loader does not search and A unchanged: now the loader
  // takes A's, and the cache must not answer with B's.
  fs::copy_file(kZlib, elsewhere + "/libd9mtestz.so.1");
  EXPECT_EQ(child(search), "loaded " + a + "/libd9mtestz.so.1");
  EXPECT_EQ(child(search), "cache " + a + "/libd9mtestz.so.1");
  // A file appearing in a glibc-hwcaps level of A (which RTLD_DI_SERINFO does not list), A itself
  // unchanged: the loader prefers it where the CPU has the level, and either way it is noted.
  fs::create_directories(a + "/glibc-hwcaps/x86-64-v2");
  EXPECT_EQ(child(search), "loaded " + a + "/libd9mtestz.so.1");
  EXPECT_EQ(child(search), "cache " + a + "/libd9mtestz.so.1");
  fs::copy_file(kZlib, a + "/glibc-hwcaps/x86-64-v2/libd9mtestz.so.1");
  EXPECT_EQ(child(search).rfind("loaded ", 0), 0u);
}

TEST(LoaderSearchDirs, AreTheLoadersOwnListEndingInTheDefaultDirectories) {
  const std::vector<std::string> dirs = loader_search_dirs();
  ASSERT_FALSE(dirs.empty()) << "RTLD_DI_SERINFO gave no directory";
  bool has_default = false;
  for (const std::string& d : dirs) has_default |= d == "/lib" || d == "/usr/lib" || d == "/lib64" || d == "/usr/lib64";
  EXPECT_TRUE(has_default) << "no default directory among " << dirs.size();
}

// The store keeps the cache (schema 8): what is put is found, eight contexts per library at most,
// and a read-only store answers what it has but takes nothing.
class StoreLibraryCacheTest : public test::ScratchDirTest {
 protected:
  StoreLibraryCacheTest() : ScratchDirTest("libcache") {}
};

TEST_F(StoreLibraryCacheTest, KeepsEightContextsPerLibraryAndNothingWhenReadOnly) {
  const std::string p = path("s.sqlite");
  {
    Store s = Store::open(p, Store::Mode::read_write);
    const LibraryVersionCache c = s.library_version_cache();
    ASSERT_TRUE(c.find && c.put);
    EXPECT_FALSE(c.find("cublas", "ctx0"));
    // All in the same second, most likely: the one just written is kept whatever the order of ties.
    for (int i = 0; i < 12; ++i) {
      c.put("cublas", "ctx" + std::to_string(i), "entry" + std::to_string(i));
      EXPECT_EQ(c.find("cublas", "ctx" + std::to_string(i)), std::optional<std::string>("entry" + std::to_string(i)));
    }
    c.put("cusparse", "ctx0", "sparse");
    c.put("cublas", "ctx11", "entry11b");
    EXPECT_EQ(c.find("cublas", "ctx11"), std::optional<std::string>("entry11b"));
    EXPECT_EQ(c.find("cusparse", "ctx0"), std::optional<std::string>("sparse"));
    int kept = 0;
    for (int i = 0; i < 12; ++i) kept += c.find("cublas", "ctx" + std::to_string(i)).has_value();
    EXPECT_EQ(kept, 8);
  }
  Store r = Store::open(p, Store::Mode::read_only);
  const LibraryVersionCache c = r.library_version_cache();
  EXPECT_EQ(c.find("cusparse", "ctx0"), std::optional<std::string>("sparse"));
  c.put("cusparse", "ctx1", "x");  // does not throw
  EXPECT_FALSE(c.find("cusparse", "ctx1"));
}

// A store `d9m merge -o` replaced after this process opened it takes nothing into the cache: the
// write would go into the old file's log under the new file's log name, and a reader of the new
// file would apply it (found by review: a run started during a merge left the merged store
// unreadable; the cache's write was the one write that did not check).
TEST_F(StoreLibraryCacheTest, AStoreReplacedSinceItWasOpenedTakesNothing) {
  const std::string p = path("s.sqlite"), merged = path("merged.sqlite");
  { Store::open(merged, Store::Mode::read_write); }
  Store old = Store::open(p, Store::Mode::read_write);
  const LibraryVersionCache c = old.library_version_cache();
  ASSERT_EQ(std::rename(merged.c_str(), p.c_str()), 0);  // as merge puts its result in place
  c.put("cublas", "ctx0", "entry");
  // A reader of the new file, while the old connection is still open (its log not yet removed).
  Store now = Store::open(p, Store::Mode::read_only);
  EXPECT_FALSE(now.library_version_cache().find("cublas", "ctx0"));
  EXPECT_TRUE(verify_store(now).problems.empty());
  struct stat st {};
  EXPECT_TRUE(::stat((p + "-wal").c_str(), &st) != 0 || st.st_size == 0) << "a log of " << st.st_size << " bytes";
}

}  // namespace
}  // namespace d9m
