// The disk kernel cache's entry files: round trip, damage, hash collisions,
// clearing, and an unwritable directory (the cross-process behaviour is
// tests/disk_cache/two_processes.sh).
#include "codegen/disk_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace kiln::codegen {
namespace {

std::filesystem::path freshDir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_disk_cache_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(DiskCache, StoresAndLoads) {
  DiskCache cache(freshDir("roundtrip"));
  EXPECT_FALSE(cache.load("key one"));
  const std::string payload("object\0code\xff", 12);
  cache.store("key one", payload);
  EXPECT_EQ(cache.load("key one"), payload);
  EXPECT_FALSE(cache.load("key two"));
  const DiskCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 2);
  EXPECT_EQ(s.writes, 1);
  EXPECT_EQ(cache.clear(), 1);
  EXPECT_FALSE(cache.load("key one"));
}

TEST(DiskCache, AnotherKeyInTheSameFileIsAMiss) {
  DiskCache cache(freshDir("collision"));
  cache.store("key one", "payload one");
  // Pretend "key two" hashes to the file of "key one".
  std::filesystem::copy_file(cache.pathFor("key one"), cache.pathFor("key two"));
  EXPECT_FALSE(cache.load("key two"));
  EXPECT_EQ(cache.stats().corrupt, 0);
  EXPECT_EQ(cache.load("key one"), "payload one");
}

TEST(DiskCache, DamagedEntriesAreDetectedAndRemoved) {
  DiskCache cache(freshDir("damage"));
  const std::string payload(1000, 'x');
  for (int cut : {0, 7, 20, 1020, 1030}) {
    cache.store("k", payload);
    std::filesystem::resize_file(cache.pathFor("k"), static_cast<uintmax_t>(cut));
    EXPECT_FALSE(cache.load("k")) << "truncated to " << cut;
    EXPECT_FALSE(std::filesystem::exists(cache.pathFor("k"))) << "truncated to " << cut;
  }
  cache.store("k", payload);
  {
    std::fstream f(cache.pathFor("k"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(500);
    f.put('y');
  }
  EXPECT_FALSE(cache.load("k"));
  EXPECT_EQ(cache.stats().corrupt, 6);
  cache.store("k", payload);
  EXPECT_EQ(cache.load("k"), payload);
}

TEST(DiskCache, AnUnwritableDirectoryTurnsItOff) {
  const auto file = freshDir("unwritable");
  std::ofstream(file) << "a file where the directory should be";
  DiskCache cache(file / "sub");
  EXPECT_TRUE(cache.enabled());
  testing::internal::CaptureStderr();
  cache.store("k", "v");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("kiln: kernel disk cache turned off: cannot create"), std::string::npos) << err;
  EXPECT_FALSE(cache.enabled());
  EXPECT_FALSE(cache.load("k"));
  std::filesystem::remove(file);
}

TEST(DiskCache, EmptyDirectoryIsOff) {
  DiskCache cache("");
  EXPECT_FALSE(cache.enabled());
  cache.store("k", "v");
  EXPECT_FALSE(cache.load("k"));
  EXPECT_EQ(cache.clear(), 0);
}

}  // namespace
}  // namespace kiln::codegen
