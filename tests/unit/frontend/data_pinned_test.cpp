// Pinned batches (DataLoaderOptions::pinMemory) and data::DevicePrefetcher,
// on the CPU and on OpenCL when there is a device (PoCL here).
#include <gtest/gtest.h>

#include "frontend/kiln.h"
#include "runtime/device_interface.h"
#include "tests/unit/frontend/data_test_util.h"

namespace kiln::data {
namespace {

using testing::NumberDataset;

TEST(DataLoaderPinMemory, BatchesLandInPinnedMemory) {
  auto dataset = std::make_shared<NumberDataset>(6);
  for (int workers : {0, 2}) {
    DataLoader pinned(dataset, {.batchSize = 4, .numWorkers = workers, .pinMemory = true});
    int batches = 0;
    for (Batch& b : pinned) {
      EXPECT_TRUE(b.data().isPinned()) << workers << " workers";
      EXPECT_TRUE(b.target().isPinned()) << workers << " workers";
      ++batches;
    }
    EXPECT_EQ(batches, 2);
    DataLoader pageable(dataset, {.batchSize = 4, .numWorkers = workers});
    for (Batch& b : pageable) EXPECT_FALSE(b.data().isPinned());
  }
}

TEST(DataLoaderPinMemory, ACollateOfOnesOwnIsPinnedToo) {
  DataLoader loader(std::make_shared<NumberDataset>(4), {.batchSize = 2, .numWorkers = 1, .pinMemory = true});
  loader.setCollate([](const std::vector<Example>& examples) {
    std::vector<Tensor> labels;
    for (const Example& e : examples) labels.push_back(e.target());
    return Batch{stack(labels, 0)};
  });
  std::vector<int64_t> all;
  for (Batch& b : loader) {
    ASSERT_EQ(b.size(), 1u);
    EXPECT_TRUE(b.data().isPinned());
    for (int64_t v : b.data().toVector<int64_t>()) all.push_back(v);
  }
  EXPECT_EQ(all, (std::vector<int64_t>{0, 1, 2, 3}));
}

/// The batches of `loader` through a DevicePrefetcher to `device`, back on
/// the CPU, after checking they were on `device`; and 2 * data summed on the
/// device, which reads each batch on the consumer's stream.
void expectPrefetchedEqual(Device device) {
  auto dataset = std::make_shared<NumberDataset>(11);
  DataLoader loader(dataset, {.batchSize = 4, .shuffle = true, .numWorkers = 2, .pinMemory = true, .seed = 3});
  loader.setEpoch(5);
  std::vector<std::vector<float>> expected;
  std::vector<std::vector<int64_t>> expectedLabels;
  for (Batch& b : loader) {
    expected.push_back(b.data().toVector());
    expectedLabels.push_back(b.target().toVector<int64_t>());
  }
  loader.setEpoch(5);
  size_t i = 0;
  for (Batch& b : DevicePrefetcher(loader, device)) {
    ASSERT_LT(i, expected.size());
    EXPECT_EQ(b.data().device(), device);
    EXPECT_EQ(b.target().device(), device);
    EXPECT_EQ(b.data().toVector(), expected[i]) << "batch " << i;
    EXPECT_EQ(b.target().toVector<int64_t>(), expectedLabels[i]) << "batch " << i;
    const Tensor doubled = mul(b.data(), 2.0);
    std::vector<float> want = expected[i];
    for (float& v : want) v *= 2;
    EXPECT_EQ(doubled.toVector(), want) << "batch " << i;
    ++i;
  }
  EXPECT_EQ(i, expected.size());
}

TEST(DevicePrefetcher, OnTheCpuBatchesPassThrough) { expectPrefetchedEqual(Device::cpu()); }

TEST(DevicePrefetcher, CopiesBatchesToOpenCl) {
  const Device device = Device::opencl();
  std::string why;
  if (!runtime::isDeviceAvailable(device, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  expectPrefetchedEqual(device);
}

TEST(DevicePrefetcher, AnUnusableDeviceIsAnError) {
  DataLoader loader(std::make_shared<NumberDataset>(2));
  const Device device = Device::cuda(7);
  if (runtime::isDeviceAvailable(device)) GTEST_SKIP() << "there is a cuda:7";
  try {
    DevicePrefetcher prefetcher(loader, device);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DevicePrefetcher: cannot use cuda:7"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::data
