// kiln::setDeterministic and manualSeed (frontend/determinism.h, Note
// [Determinism]): a CUDA matmul without cuBLAS's workspace configuration is
// an error naming the op, the device and the setting, and is allowed with
// it or with the setting off; the CPU BLAS is pinned to OpenBLAS, not
// measured; one seed gives the same dropout masks on the CPU and an OpenCL
// device; two training runs from one seed give the same bits.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/blas_choice.h"
#include "common/error_of.h"
#include "common/same_bits.h"
#include "frontend/determinism.h"
#include "frontend/kiln.h"
#include "runtime/blas.h"
#include "runtime/device_interface.h"

namespace kiln {
namespace {

/// Turns the setting on for one test and restores the environment.
class Deterministic : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* c = std::getenv("CUBLAS_WORKSPACE_CONFIG");
    saved_ = c ? std::optional<std::string>(c) : std::nullopt;
    ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
    setDeterministic(true);
  }
  void TearDown() override {
    setDeterministic(false);
    if (saved_) ::setenv("CUBLAS_WORKSPACE_CONFIG", saved_->c_str(), 1);
    else ::unsetenv("CUBLAS_WORKSPACE_CONFIG");
  }

 private:
  std::optional<std::string> saved_;
};

TEST_F(Deterministic, ACudaMatmulNeedsCublasWorkspaceConfig) {
  EXPECT_TRUE(isDeterministic());
  EXPECT_EQ(errorOf([] { detail::checkDeterministic(ir::Op::matmul, Device::cuda(1)); }),
            "matmul: on cuda:1 it has no deterministic implementation as configured, and "
            "kiln::setDeterministic(true) is on: cuBLAS is not deterministic unless "
            "CUBLAS_WORKSPACE_CONFIG=:4096:8 (or :16:8) is set in the environment before the program starts");
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 1);
  EXPECT_EQ(errorOf([] { detail::checkDeterministic(ir::Op::matmul, Device::cuda(1)); }), "no error");
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8", 1);
  EXPECT_EQ(errorOf([] { detail::checkDeterministic(ir::Op::matmul, Device::cuda(1)); }), "no error");
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":1024:2", 1);
  EXPECT_NE(errorOf([] { detail::checkDeterministic(ir::Op::matmul, Device::cuda(1)); }), "no error");
}

TEST_F(Deterministic, OtherOpsAndDevicesAndTheSettingOffPass) {
  EXPECT_EQ(errorOf([] { detail::checkDeterministic(ir::Op::matmul, Device::cpu()); }), "no error");
  EXPECT_EQ(errorOf([] { detail::checkDeterministic(ir::Op::matmul, Device::opencl()); }), "no error");
  EXPECT_EQ(errorOf([] { detail::checkDeterministic(ir::Op::index_add, Device::cuda()); }), "no error");
  setDeterministic(false);
  EXPECT_EQ(errorOf([] { detail::checkDeterministic(ir::Op::matmul, Device::cuda()); }), "no error");
}

TEST_F(Deterministic, TheCpuBlasAndTheBf16ProductsArePinnedNotMeasured) {
  if (const char* blas = std::getenv("KILN_BLAS"); blas && *blas && std::string(blas) != "auto")
    GTEST_SKIP() << "KILN_BLAS=" << blas << " names the library explicitly";
  const codegen::BlasChoice& c = codegen::cpuBlasChoice();
  EXPECT_EQ(c.library, runtime::BlasLibrary::openblas);
  EXPECT_EQ(c.how, "kiln::setDeterministic(true): OpenBLAS, not measured");
  EXPECT_EQ(runtime::blasLibrary(), runtime::BlasLibrary::openblas);
  if (const char* bf16 = std::getenv("KILN_BF16_MATMUL"); !bf16 || !*bf16 || std::string(bf16) == "auto") {
    EXPECT_EQ(c.halfMatmul, runtime::HalfMatmul::viaF32);
    EXPECT_EQ(c.halfHow, "kiln::setDeterministic(true): via f32, not measured");
    EXPECT_EQ(runtime::halfMatmul(), runtime::HalfMatmul::viaF32);
  }
  // A matmul under the setting runs (through dispatch's check) and is exact
  // on small integers.
  const Tensor a = fromVector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(matmul(a, a).toVector(), (std::vector<float>{7, 10, 15, 22}));
}

TEST(Determinism, OneSeedGivesTheSameMasksOnEveryDevice) {
  const Device device = Device::opencl();
  std::string why;
  if (!runtime::isDeviceAvailable(device, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  const Tensor x = ones({3, 50}, DType::f32);
  manualSeed(1234);
  const Tensor onCpu = dropout(x, 0.5, true);
  manualSeed(1234);
  const Tensor onDevice = dropout(x.to(device), 0.5, true);
  EXPECT_TRUE(sameBits(onCpu, onDevice.cpu()));
  manualSeed(1235);
  EXPECT_FALSE(sameBits(onCpu, dropout(x, 0.5, true))) << "another seed, another mask";
}

/// Three SGD steps of a small MLP with dropout from seed `seed`: its weights.
std::vector<Tensor> train(uint64_t seed) {
  manualSeed(seed);
  nn::Sequential model(nn::Linear(8, 32), nn::ReLU(), nn::Dropout(0.2), nn::Linear(32, 4));
  optim::SGD sgd(model->parameters(), optim::SGDOptions{.lr = 0.1});
  const Tensor x = randn({16, 8}, DType::f32);
  const Tensor y = randn({16, 4}, DType::f32);
  for (int step = 0; step < 3; ++step) {
    sgd.zeroGrad();
    mseLoss(model->forward(x), y).backward();
    sgd.step();
  }
  return model->parameters();
}

TEST_F(Deterministic, TwoRunsFromOneSeedGiveTheSameBits) {
  const std::vector<Tensor> a = train(5), b = train(5), c = train(6);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(sameBits(a[i], b[i])) << "parameter " << i;
  EXPECT_FALSE(sameBits(a[0], c[0])) << "another seed, other weights";
}

}  // namespace
}  // namespace kiln
