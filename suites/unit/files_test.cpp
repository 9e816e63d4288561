// Input files read with limits and output files written whole (harness/core/files.h), tried the
// way an attacker or an accident would: planted symlinks and FIFOs, folders where files belong,
// devices that never end.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include "harness/core/error.h"
#include "harness/core/files.h"

#include "scratch_dir.h"
namespace d9m {
namespace {

namespace fs = std::filesystem;

class FilesTest : public test::ScratchDirTest {
 protected:
  FilesTest() : ScratchDirTest("files") {}
  // Every name in the folder, so a test sees whatever a write left behind.
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }
  static ErrorCategory category_of(const std::function<void()>& f, std::string* message = nullptr) {
    try {
      f();
    } catch (const Error& e) {
      if (message) *message = e.what();
      return e.category();
    }
    ADD_FAILURE() << "no error";
    return ErrorCategory::internal;
  }
};

TEST_F(FilesTest, APlantedTemporaryNameIsNeverWrittenThrough) {
  // The old fixed temporary "<path>.tmp", planted as a symlink to a file the attacker wants
  // overwritten, and as a dangling one (which O_CREAT without O_EXCL would create).
  write(path("victim"), "precious");
  fs::create_symlink(path("victim"), path("report.md.tmp"));
  fs::create_symlink(path("created-by-us"), path("other.md.tmp"));
  write_file_atomically(path("report.md"), "the report");
  write_file_atomically(path("other.md"), "the other report");
  EXPECT_EQ(contents(path("victim")), "precious");
  EXPECT_FALSE(fs::exists(path("created-by-us")));
  EXPECT_TRUE(fs::is_symlink(path("report.md.tmp")));
  EXPECT_EQ(contents(path("report.md")), "the report");
  EXPECT_EQ(contents(path("other.md")), "the other report");
  EXPECT_EQ(names(), (std::vector<std::string>{"other.md", "other.md.tmp", "report.md", "report.md.tmp", "victim"}));
}

TEST_F(FilesTest, ASymlinkOrFifoAtTheTargetIsReplacedNotWrittenThrough) {
  write(path("victim"), "precious");
  fs::create_symlink(path("victim"), path("out.json"));
  ASSERT_EQ(::mkfifo(path("pipe.json").c_str(), 0600), 0);  // opening it for writing would block
  write_file_atomically(path("out.json"), "{}");
  write_file_atomically(path("pipe.json"), "[]");
  EXPECT_EQ(contents(path("victim")), "precious");
  EXPECT_FALSE(fs::is_symlink(path("out.json")));
  EXPECT_EQ(contents(path("out.json")), "{}");
  EXPECT_TRUE(fs::is_regular_file(path("pipe.json")));
  EXPECT_EQ(contents(path("pipe.json")), "[]");
}

// A character device named as the output is written into, never replaced: `-o /dev/null` run as
// root renamed a regular file over /dev/null. (Made with mknod where the test may: as root.)
TEST_F(FilesTest, ACharacterDeviceAtTheTargetIsWrittenIntoNotReplaced) {
  if (::mknod(path("null").c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) GTEST_SKIP() << "mknod needs root";
  check_output_file(path("null"));
  write_file_atomically(path("null"), "the report");
  struct stat st {};
  ASSERT_EQ(::lstat(path("null").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(names(), (std::vector<std::string>{"null"}));  // no temporary left beside it
}

TEST_F(FilesTest, AWrittenFileHasTheUsualPermissionsAndReplacesTheOldOneWhole) {
  write_file_atomically(path("a"), std::string(1 << 20, 'x'));
  write_file_atomically(path("a"), "short");
  EXPECT_EQ(contents(path("a")), "short");
  const mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat st {};
  ASSERT_EQ(::stat(path("a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u & ~mask) << "mkstemp's 0600 would hide reports from their readers";
  EXPECT_EQ(names(), std::vector<std::string>{"a"});
}

TEST_F(FilesTest, AFailedWriteNamesThePathAndLeavesNothingBehind) {
  std::string m;
  EXPECT_EQ(category_of([&] { write_file_atomically(path("no/such/folder/x"), "x"); }, &m), ErrorCategory::environment);
  EXPECT_NE(m.find("no/such/folder/x: cannot write (No such file or directory)"), std::string::npos) << m;
  fs::create_directory(path("folder"));
  EXPECT_EQ(category_of([&] { write_file_atomically(path("folder"), "x"); }, &m), ErrorCategory::environment);
  EXPECT_TRUE(fs::is_directory(path("folder")));
  EXPECT_EQ(names(), std::vector<std::string>{"folder"}) << "a temporary was left behind";
}

TEST_F(FilesTest, InputFilesAreReadWithALimitAndFoldersAreRefused) {
  write(path("cat.json"), "{}");
  EXPECT_EQ(read_input_file(path("cat.json"), "catalogue"), "{}");
  std::string m;
  fs::create_directory(path("dir"));
  EXPECT_EQ(category_of([&] { read_input_file(path("dir"), "catalogue"); }, &m), ErrorCategory::usage);
  EXPECT_NE(m.find("dir: is a folder, not a catalogue file"), std::string::npos) << m;
  EXPECT_EQ(category_of([&] { read_input_file(path("missing"), "baseline"); }, &m), ErrorCategory::usage);
  EXPECT_NE(m.find("missing: cannot read the baseline (No such file or directory)"), std::string::npos) << m;
  // A regular file is refused by its size, before it is read.
  write(path("big.json"), std::string(1001, ' '));
  EXPECT_EQ(category_of([&] { read_input_file(path("big.json"), "catalogue", 1000); }, &m), ErrorCategory::usage);
  EXPECT_NE(m.find("big.json: 1001 bytes, larger than the limit of 1000 bytes for a catalogue"), std::string::npos) << m;
  EXPECT_EQ(read_input_file(path("big.json"), "catalogue", 1001).size(), 1001u);
  // A device that never ends is read up to the limit only.
  EXPECT_EQ(category_of([&] { read_input_file("/dev/zero", "catalogue"); }, &m), ErrorCategory::usage);
  EXPECT_NE(m.find("/dev/zero: larger than the limit of 64 MiB for a catalogue (read stopped there)"), std::string::npos) << m;
  EXPECT_EQ(read_input_file("/dev/null", "catalogue"), "");
}

TEST_F(FilesTest, APipeIsReadToItsEnd) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  std::thread writer([&] { write(path("fifo"), std::string(200000, 'p')); });
  const std::string text = read_input_file(path("fifo"), "catalogue");
  writer.join();
  EXPECT_EQ(text, std::string(200000, 'p'));
}

TEST_F(FilesTest, OutputLocationsAreCheckedBeforeAnythingIsWritten) {
  write(path("file"), "x");
  fs::create_directory(path("dir"));
  std::string m;
  EXPECT_NO_THROW(check_output_file(path("new.md")));
  EXPECT_NO_THROW(check_output_file(path("file")));
  EXPECT_EQ(category_of([&] { check_output_file(path("dir")); }, &m), ErrorCategory::environment);
  EXPECT_NE(m.find("dir: is a folder, not a file to write"), std::string::npos) << m;
  EXPECT_EQ(category_of([&] { check_output_file(path("none/x.md")); }, &m), ErrorCategory::environment);
  EXPECT_NE(m.find("none/x.md: cannot write: folder " + path("none") + " (No such file or directory)"), std::string::npos) << m;
  EXPECT_EQ(category_of([&] { check_output_file(path("file/x.md")); }, &m), ErrorCategory::environment);

  EXPECT_NO_THROW(check_output_folder(path("dir")));
  EXPECT_NO_THROW(check_output_folder(path("dir/a/b/c")));
  EXPECT_EQ(category_of([&] { check_output_folder(path("file")); }, &m), ErrorCategory::environment);
  EXPECT_NE(m.find("file: cannot create folder: it is a file, not a folder"), std::string::npos) << m;
  EXPECT_EQ(category_of([&] { check_output_folder(path("file/a/b")); }, &m), ErrorCategory::environment);
  EXPECT_NE(m.find("file/a/b: cannot create folder: " + path("file") + " is a file, not a folder"), std::string::npos) << m;
  EXPECT_EQ(category_of([&] { check_output_folder("/proc/d9m-outputs"); }, &m), ErrorCategory::environment);
  EXPECT_NE(m.find("/proc/d9m-outputs: cannot write in folder /proc"), std::string::npos) << m;
  EXPECT_EQ(names(), (std::vector<std::string>{"dir", "file"})) << "a check created something";
  EXPECT_TRUE(fs::is_empty(path("dir")));
}

TEST(FileNames, PathSafeNamesAreOneHarmlessComponent) {
  for (const char* ok : {"a", "nhwc_8x16x16x32", "cpu.serial", "cudnn.algo1", "a-b+c", "_canary", "x..y"})
    EXPECT_TRUE(is_path_safe_name(ok)) << ok;
  for (const char* bad : {"", ".", "..", ".hidden", "a/b", "/", "a\\b", "a b", "a\nb", "caf\xc3\xa9", "a*"})
    EXPECT_FALSE(is_path_safe_name(bad)) << bad;
  EXPECT_TRUE(is_path_safe_name(std::string(kMaxNameLength, 'n')));
  EXPECT_FALSE(is_path_safe_name(std::string(kMaxNameLength + 1, 'n')));
}

}  // namespace
}  // namespace d9m
