// The caching allocator of every test device as a user sees it: PyTorch's
// statistics, reuse of freed memory without new segments, emptyCache, and
// the out-of-memory error that loses nothing allocated before.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/error_of.h"
#include "device/device_list.h"

namespace kiln::testing {
namespace {

class DeviceMemory : public DeviceTest {};

int64_t stat(Device d, const char* key) {
  const runtime::MemoryStats s = memoryStats(d);
  auto it = s.find(key);
  EXPECT_NE(it, s.end()) << "no statistic " << key << " on " << d.str();
  return it == s.end() ? -1 : it->second;
}

TEST_P(DeviceMemory, FreedMemoryIsReusedWithoutNewSegments) {
  const Device dev = device();
  synchronize(dev);
  const int64_t allocated = stat(dev, "allocated_bytes.all.current");
  const int64_t reserved = stat(dev, "reserved_bytes.all.current");
  {
    Tensor t = zeros({1000, 3}, DType::f32, dev);  // 12000 bytes, rounded to 12288
    EXPECT_EQ(stat(dev, "allocated_bytes.all.current") - allocated, 12288);
    EXPECT_GE(stat(dev, "allocated_bytes.all.peak"), allocated + 12288);
  }
  EXPECT_EQ(stat(dev, "allocated_bytes.all.current"), allocated);
  const int64_t reservedAfter = stat(dev, "reserved_bytes.all.current");
  EXPECT_GE(reservedAfter, reserved) << "freed memory stays in the cache";
  for (int i = 0; i < 5; ++i) (void)zeros({1000, 3}, DType::f32, dev);
  EXPECT_EQ(stat(dev, "reserved_bytes.all.current"), reservedAfter) << "reused, not allocated again";
  resetPeakMemoryStats(dev);
  EXPECT_EQ(stat(dev, "allocated_bytes.all.peak"), stat(dev, "allocated_bytes.all.current"));
  EXPECT_FALSE(memorySummary(dev).empty());
}

TEST_P(DeviceMemory, EmptyCacheGivesUnusedMemoryBack) {
  const Device dev = device();
  (void)zeros({300000}, DType::f32, dev);  // a large block, now cached
  synchronize(dev);
  emptyCache(dev);
  const int64_t reserved = stat(dev, "reserved_bytes.all.current");
  EXPECT_GE(reserved, stat(dev, "allocated_bytes.all.current"));
  EXPECT_LE(reserved - stat(dev, "allocated_bytes.all.current"), 0 + (dev.isCpu() ? 0 : 20 << 20))
      << "little stays cached after emptyCache";
}

// KILN_TEST_OOM=1 runs it, in a process whose OpenCL device was limited
// (tests/CMakeLists.txt: POCL_MEMORY_LIMIT=1, 1 GiB).
TEST_P(DeviceMemory, OutOfMemoryIsAnErrorThatLosesNothing) {
  const Device dev = device();
  if (!std::getenv("KILN_TEST_OOM")) GTEST_SKIP() << "KILN_TEST_OOM is not set (ctest's device.oom runs it)";
  if (dev.isCpu()) GTEST_SKIP() << "the host's memory is not limited";
  const Tensor kept = values({1000}).to(dev);
  std::vector<Tensor> blocks;
  std::string error;
  for (int i = 0; i < 64 && error.empty(); ++i) {
    try {
      blocks.push_back(zeros({64 << 20}, DType::f32, dev));  // 256 MiB each
    } catch (const Error& e) {
      error = e.what();
    }
  }
  ASSERT_FALSE(error.empty()) << "the device never ran out of memory";
  EXPECT_NE(error.find(dev.str() + ": out of memory"), std::string::npos) << error;
  EXPECT_NE(error.find("268435456 bytes"), std::string::npos) << "names the request: " << error;
  EXPECT_GE(stat(dev, "num_ooms"), 1);
  EXPECT_FALSE(blocks.empty());
  EXPECT_TRUE(sameBits(kept.cpu(), values({1000}))) << "what was computed before is intact";
  EXPECT_EQ(blocks.front().narrow(0, 5, 1).item<float>(), 0.0f);
  blocks.clear();
  emptyCache(dev);
  EXPECT_EQ((zeros({64 << 20}, DType::f32, dev) + 1.0).narrow(0, 3, 1).item<float>(), 1.0f)
      << "the device works after the error";
}

KILN_INSTANTIATE_DEVICE_TESTS(DeviceMemory);

}  // namespace
}  // namespace kiln::testing
