// The file store across processes (fork) and over files it did not write:
// forked ranks count and exchange values through one file; the last store
// to close removes the file and a new one starts empty; a file of
// something else is refused naming the path; a record cut short by a
// crashed writer is dropped and the next write is read; corrupt bytes are
// an error naming the offset, never a crash.
#include "runtime/dist_file_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error_of.h"
#include "unit/runtime/dist_test_util.h"

namespace kiln::runtime::dist {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class DistFileStore : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("kiln-file-store-{}-{}", getpid(), counter_++);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name = "store") const { return (dir_ / name).string(); }

  static void writeRaw(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::app) << bytes;
  }

  fs::path dir_;
  static inline int counter_ = 0;
};

TEST_F(DistFileStore, ForkedProcessesMeetInOneFile) {
  const std::string p = path();
  FileStore parent(p, 3000ms);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 3; ++rank)
    pids.push_back(testutil::forkChild([p, rank] {
      FileStore s(p, 3000ms);
      s.add("joined", 1);
      s.set(fmt::format("rank/{}", rank), std::to_string(rank * 10));
      s.wait({"rank/0", "rank/1", "rank/2"});
      int sum = 0;
      for (int r = 0; r < 3; ++r) sum += std::stoi(s.getString(fmt::format("rank/{}", r)));
      return sum == 30 ? 0 : 2;
    }));
  for (pid_t pid : pids) EXPECT_EQ(testutil::waitChild(pid), 0);
  EXPECT_EQ(parent.getString("joined"), "3");
  EXPECT_EQ(parent.numKeys(), 4);
}

TEST_F(DistFileStore, TheLastStoreToCloseRemovesTheFile) {
  const std::string p = path();
  {
    FileStore a(p, 500ms);
    {
      FileStore b(p, 500ms);
      b.set("k", std::string("v"));
    }
    EXPECT_TRUE(fs::exists(p));  // a still uses it
    EXPECT_EQ(a.getString("k"), "v");
  }
  EXPECT_FALSE(fs::exists(p));
  FileStore fresh(p, 100ms);
  EXPECT_EQ(fresh.numKeys(), 0);
  EXPECT_FALSE(fresh.check({"k"}));
}

TEST_F(DistFileStore, AFileOfSomethingElseIsRefused) {
  const std::string p = path("notes.txt");
  writeRaw(p, "these are my notes, not a store\n");
  EXPECT_EQ(errorOf([&] { FileStore s(p, 100ms); }),
            fmt::format("store: {} is not a kiln file store (it does not start with KILNFS01)", p));
  EXPECT_EQ(
      errorOf([&] { FileStore s(dir_.string() + "/no/such/dir/store", 100ms); }),
      fmt::format("store: cannot open file store {}/no/such/dir/store: no such file or directory", dir_.string()));
}

TEST_F(DistFileStore, ARecordCutShortIsDroppedAndTheNextWriteIsRead) {
  const std::string p = path();
  FileStore a(p, 300ms);
  a.set("whole", std::string("1"));
  // A writer that died after 7 bytes of a set of "cut" (kind 1, key length 3, "cu").
  writeRaw(p, std::string("\x01\x03\x00\x00\x00"
                          "cu",
                          7));
  FileStore b(p, 300ms);  // opening appends its user count after cutting the record off
  EXPECT_EQ(b.getString("whole"), "1");
  b.set("next", std::string("2"));
  EXPECT_EQ(a.getString("next"), "2");
  EXPECT_FALSE(a.check({"cut"}));
}

TEST_F(DistFileStore, CorruptBytesAreAnErrorNamingTheOffset) {
  const std::string p = path();
  FileStore a(p, 300ms);
  const auto size = fs::file_size(p);
  writeRaw(p, std::string("\x07garbage-garbage", 16));
  EXPECT_EQ(errorOf([&] { a.check({"x"}); }), fmt::format("store: file store {} is corrupt at byte {}", p, size));
  // A length past every bound is corrupt too, not an allocation.
  const std::string q = path("other");
  FileStore c(q, 300ms);
  const auto qsize = fs::file_size(q);
  writeRaw(q, std::string("\x01\xff\xff\xff\x7f", 5));
  EXPECT_EQ(errorOf([&] { c.numKeys(); }), fmt::format("store: file store {} is corrupt at byte {}", q, qsize));
}

}  // namespace
}  // namespace kiln::runtime::dist
