// kiln on a CUDA GPU through its own driver (runtime/cuda_device.cpp) and
// target (codegen/cuda_target.cpp): tensors round trip, fills of every
// pattern width, eager ops and compiled programs equal the CPU's bits,
// matmul (cuBLAS, and kiln's kernel for integers) agrees with the CPU,
// index_select and index_add equal it, streams are ordered by events, events
// time work, memory goes back to the driver, and a cubin for another
// architecture is refused by name. Label `gpu`: skipped with "no GPU" and
// the driver's reason where CUDA is unavailable; written to run unattended
// on any NVIDIA GPU (the H200 of DEVICE_NOTES).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "codegen/cuda_target.h"
#include "codegen/nvrtc_compiler.h"
#include "common/error_of.h"
#include "frontend/kiln.h"
#include "runtime/device_interface.h"

namespace kiln {
namespace {

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    std::string why;                                                             \
    if (!isAvailable(DeviceType::cuda, &why)) GTEST_SKIP() << "no GPU: " << why; \
  } while (0)

constexpr Device kGpu = Device::cuda(0);

/// Bit-for-bit equality of two tensors' values (read from their devices).
::testing::AssertionResult sameBits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const std::vector<double> x = a.to(DType::f64).toVector<double>(), y = b.to(DType::f64).toVector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0 && !(std::isnan(x[i]) && std::isnan(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

/// |a - b| <= tol * (1 + |b|) elementwise (b the CPU's reference).
::testing::AssertionResult close(const Tensor& a, const Tensor& b, double tol) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const std::vector<double> x = a.to(DType::f64).toVector<double>(), y = b.to(DType::f64).toVector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= tol * (1 + std::abs(y[i]))))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << x[i] << " vs " << y[i] << " (tol " << tol << ")";
  return ::testing::AssertionSuccess();
}

Tensor values(const Shape& shape, float scale = 1.0f) {
  std::vector<float> v(static_cast<size_t>(ir::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((static_cast<int64_t>(i) * 37) % 23 - 11) / 7;
  return fromVector(v, shape);
}

constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16,    DType::bf16,
                                DType::i32, DType::i64, DType::boolean};

TEST(CudaDevice, PropertiesNameTheGpu) {
  SKIP_WITHOUT_GPU();
  const runtime::DeviceProperties& p = runtime::deviceInterface(kGpu).properties();
  std::cout << "[ info ] " << p.name << ", " << p.arch << ", " << p.driverVersion << ", " << p.totalMemory << " bytes, "
            << p.computeUnits << " SMs\n";
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(codegen::smArchOf(p.arch), 0) << p.arch;
  EXPECT_TRUE(p.driverVersion.starts_with("CUDA ")) << p.driverVersion;
  EXPECT_GT(p.totalMemory, int64_t{1} << 30);
  EXPECT_GT(p.computeUnits, 0);
  EXPECT_GE(p.maxThreadsPerBlock, 256);
  EXPECT_GE(p.sharedMemoryPerBlock, 48u * 1024);
  EXPECT_FALSE(p.hostAccessible);
  EXPECT_GE(deviceCount(DeviceType::cuda), 1);
  EXPECT_EQ(Device::best(), kGpu);
  EXPECT_EQ(codegen::targetFor(kGpu).description(kGpu).rfind(p.arch, 0), 0u);
}

TEST(CudaDevice, TensorsRoundTripEveryDTypeAndView) {
  SKIP_WITHOUT_GPU();
  for (DType dtype : kAllDTypes) {
    const Tensor x = values({37, 5}, 3.0f).to(dtype);
    const Tensor there = x.to(kGpu);
    EXPECT_EQ(there.device(), kGpu);
    EXPECT_TRUE(sameBits(there.cpu(), x)) << dtypeName(dtype);
    EXPECT_TRUE(sameBits(x.t().to(kGpu).cpu(), x.t())) << dtypeName(dtype) << " transposed";
    EXPECT_TRUE(sameBits(there.narrow(0, 3, 7).cpu(), x.narrow(0, 3, 7))) << dtypeName(dtype) << " narrowed";
  }
  EXPECT_EQ(zeros({0}, DType::f32, kGpu).cpu().numel(), 0);
  EXPECT_EQ(fromVector({1, 2, 3}, kGpu).toVector(), (std::vector<float>{1, 2, 3}));
}

TEST(CudaDevice, FillsRepeatPatternsOfEveryWidth) {
  SKIP_WITHOUT_GPU();
  struct Case {
    DType dtype;
    double value;
  };
  // 1-byte patterns (bool, zeros), 2 (f16), 4 (f32, i32), 8 with equal
  // halves (f64 0, i64 2^32 + 1) and with different ones (f64 1.5, i64 -2).
  for (const Case& c : {Case{DType::boolean, 1}, Case{DType::f32, 0}, Case{DType::f16, 1}, Case{DType::bf16, -2.5},
                        Case{DType::f32, 0.1}, Case{DType::i32, -7}, Case{DType::f64, 0},
                        Case{DType::i64, 4294967297.0}, Case{DType::f64, 1.5}, Case{DType::i64, -2}}) {
    for (int64_t n : {1, 1001, 1 << 20})
      EXPECT_TRUE(sameBits(full({n}, c.value, c.dtype, kGpu).cpu(), full({n}, c.value, c.dtype)))
          << dtypeName(c.dtype) << " " << c.value << " x " << n;
  }
  Tensor cpu = zeros({4, 6}, DType::f64), there = zeros({4, 6}, DType::f64, kGpu);
  cpu.narrow(1, 1, 3).fill_(-1.25);
  there.narrow(1, 1, 3).fill_(-1.25);
  EXPECT_TRUE(sameBits(there.cpu(), cpu));
}

TEST(CudaDevice, EagerOpsComputeTheCpusBits) {
  SKIP_WITHOUT_GPU();
  const Tensor x = values({6, 8}), b = values({8}, 0.5f);
  auto run = [&](const Tensor& x, const Tensor& b) {
    std::vector<Tensor> out;
    out.push_back(kiln::sigmoid(kiln::relu(x * 2.0 + b) - 0.5));
    out.push_back(kiln::exp(x.t()) + x.t());
    out.push_back(sum(x, {1}));
    out.push_back(amax(x, {0}, true));
    out.push_back(softmax(x, -1));
    out.push_back(layerNorm(x, {8}, b, b));
    out.push_back(cat({x.narrow(1, 2, 3), x.slice(1, 0, 8, 4)}, 1));
    out.push_back((x > 0.25).to(DType::i32) * 3);
    out.push_back(x.to(DType::f16) * 1.5 + 0.25);
    out.push_back(sum(values({3000, 257}), {0}));
    return out;
  };
  const std::vector<Tensor> cpu = run(x, b), there = run(x.to(kGpu), b.to(kGpu));
  ASSERT_EQ(cpu.size(), there.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(there[i].device(), kGpu) << i;
    EXPECT_TRUE(sameBits(cpu[i], there[i])) << "result " << i;
  }
}

TEST(CudaDevice, MatmulAgreesWithTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Tensor a, b;
    const char* what;
  };
  const Tensor a2 = values({33, 17}), b2 = values({17, 29}, 0.5f);
  const std::vector<Case> cases = {
      {a2, b2, "plain"},
      {values({17, 33}).t(), b2, "a transposed"},
      {a2, values({29, 17}).t(), "b transposed"},
      {values({3, 5, 7}), values({3, 7, 4}), "batched"},
      {values({2, 3, 5, 7}), values({7, 4}), "batch folded into rows"},
      {values({2, 3, 5, 7}), values({3, 7, 4}), "b broadcast over a batch dim"},
      {values({33, 34}).slice(1, 0, 34, 2), b2, "a doubly strided: copied first"},
      {a2, values({17, 1}).expand({17, 29}), "b stride 0: copied first"},
      {values({1, 17}), b2, "one row"},
  };
  for (const Case& c : cases) {
    for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      const double tol = dtype == DType::f64 ? 1e-12 : dtype == DType::f32 ? 1e-5 : dtype == DType::f16 ? 4e-3 : 2e-2;
      const Tensor a = c.a.to(dtype), b = c.b.to(dtype);
      const Tensor ref = matmul(a, b), got = matmul(a.to(kGpu), b.to(kGpu));
      EXPECT_EQ(got.device(), kGpu);
      EXPECT_TRUE(close(got.cpu(), ref, tol)) << c.what << ", " << dtypeName(dtype);
    }
    // Integers wrap, as on the CPU: equal bits.
    for (DType dtype : {DType::i32, DType::i64}) {
      const Tensor a = (c.a * 1000.0 + 7e5).to(dtype), b = (c.b * 3000.0).to(dtype);
      EXPECT_TRUE(sameBits(matmul(a.to(kGpu), b.to(kGpu)).cpu(), matmul(a, b))) << c.what << ", " << dtypeName(dtype);
    }
  }
  // Sums of no terms are zeros.
  EXPECT_TRUE(sameBits(matmul(values({3, 0}).to(kGpu), values({0, 4}).to(kGpu)).cpu(), zeros({3, 4})));
}

TEST(CudaDevice, IndexSelectAndIndexAddEqualTheCpu) {
  SKIP_WITHOUT_GPU();
  const Tensor idx64 = fromVector(std::vector<int64_t>{4, 0, 5, 4, 2}, Shape{5});
  const Tensor idx32 = idx64.to(DType::i32);
  for (DType dtype : kAllDTypes) {
    const Tensor x = values({6, 3, 8}, 2.0f).to(dtype);
    for (const Tensor& idx : {idx64, idx32}) {
      EXPECT_TRUE(sameBits(indexSelect(x.to(kGpu), 0, idx.to(kGpu)).cpu(), indexSelect(x, 0, idx))) << dtypeName(dtype);
      const Tensor xt = x.transpose(0, 2);  // [8, 3, 6], strided
      EXPECT_TRUE(sameBits(indexSelect(xt.to(kGpu), 2, idx.to(kGpu)).cpu(), indexSelect(xt, 2, idx)))
          << dtypeName(dtype) << " strided";
      if (dtype == DType::boolean) continue;                                     // index_add takes no bool
      const Tensor source = values({6, 5, 8}, 0.75f).to(dtype).transpose(0, 1);  // [5, 6, 8], strided
      EXPECT_TRUE(sameBits(
          indexAdd(x.narrow(1, 0, 1).expand({6, 6, 8}).contiguous().to(kGpu), 0, idx.to(kGpu), source.to(kGpu)).cpu(),
          indexAdd(x.narrow(1, 0, 1).expand({6, 6, 8}).contiguous(), 0, idx, source)))
          << dtypeName(dtype) << ": repeated indices accumulate in order";
    }
  }
  const Tensor x = values({5, 2});
  const Tensor bad = fromVector(std::vector<int64_t>{1, 7}, Shape{2});
  const std::string cpuError = errorOf([&] { indexSelect(x, 0, bad); });
  EXPECT_EQ(cpuError, "index_select: index 7 is out of range for dimension 0 of size 5");
  EXPECT_EQ(errorOf([&] { indexSelect(x.to(kGpu), 0, bad.to(kGpu)); }), cpuError);
  EXPECT_EQ(errorOf([&] {
              indexAdd(x.to(kGpu), 0, bad.to(kGpu), values({2, 2}).to(kGpu));
            }),
            errorOf([&] {
              indexAdd(x, 0, bad, values({2, 2}));
            }));
}

TEST(CudaDevice, WorkOnAnotherStreamIsSeenAfterAnEventWait) {
  SKIP_WITHOUT_GPU();
  // Long enough work on a side stream that a read on the default stream
  // without the wait would likely see it unfinished; with the wait it must
  // see all of it.
  const int64_t n = int64_t{1} << 24;
  const Stream side = Stream::create(kGpu);
  Tensor y;
  {
    StreamGuard guard(side);
    y = zeros({n}, DType::f32, kGpu);
    for (int i = 0; i < 50; ++i) y = y + 1.0;
  }
  Event done;
  done.record(side);
  Stream::defaultStream(kGpu).wait(done);
  const std::vector<float> v = y.toVector();  // on the default stream
  EXPECT_EQ(std::count(v.begin(), v.end(), 50.0f), n);
  EXPECT_TRUE(done.query());
  side.synchronize();
  EXPECT_TRUE(side.query());
}

TEST(CudaDevice, EventsTimeTheWorkBetweenThem) {
  SKIP_WITHOUT_GPU();
  const Tensor a = values({1024, 1024}).to(kGpu);
  Event start(true), end(true);
  start.record(kGpu);
  Tensor c = a;
  for (int i = 0; i < 8; ++i) c = matmul(c, a) * 1e-3;
  end.record(kGpu);
  end.synchronize();
  const double ms = start.elapsedMs(end);
  std::cout << "[ info ] 8 matmuls of 1024^2 in " << ms << " ms\n";
  EXPECT_GT(ms, 0.0);
  Event untimed;
  untimed.record(kGpu);
  EXPECT_EQ(errorOf([&] { start.elapsedMs(untimed); }), "event: elapsedMs needs two events made with enableTiming");
}

TEST(CudaDevice, FreedMemoryIsCachedAndEmptyCacheGivesItBack) {
  SKIP_WITHOUT_GPU();
  runtime::DeviceInterface& gpu = runtime::deviceInterface(kGpu);
  synchronize(kGpu);
  gpu.emptyCache();
  const runtime::AllocatorStats before = gpu.memoryStats();
  {
    const Tensor t = zeros({1 << 20}, DType::f32, kGpu);
    EXPECT_EQ(gpu.memoryStats().allocatedBytes, before.allocatedBytes + (4 << 20));
  }
  EXPECT_EQ(gpu.memoryStats().allocatedBytes, before.allocatedBytes);
  synchronize(kGpu);
  gpu.emptyCache();
  EXPECT_EQ(gpu.memoryStats().reservedBytes, before.reservedBytes);
  EXPECT_NE(gpu.memorySummary().find(gpu.properties().arch), std::string::npos);
  const std::string oom = errorOf([] { zeros({int64_t{1} << 50}, DType::f32, kGpu); });
  EXPECT_EQ(oom.rfind("cuda:0: out of memory: a request of 4503599627370496 bytes", 0), 0u) << oom;
  EXPECT_EQ((zeros({3}, DType::f32, kGpu) + 1.0).toVector(), std::vector<float>(3, 1.0f)) << "works after the error";
}

TEST(CudaDevice, CompiledEqualsEager) {
  SKIP_WITHOUT_GPU();
  auto f = [](const Tensor& x, const Tensor& b) { return layerNorm(kiln::relu(x + b) * 2.0, {8}) + sum(x, {0}); };
  auto compiled = compile(f);
  const Tensor x = values({6, 8}).to(kGpu), b = values({8}, 0.5f).to(kGpu);
  const Tensor eager = f(x, b), fused = compiled(x, b);
  EXPECT_EQ(fused.device(), kGpu);
  EXPECT_TRUE(sameBits(eager, fused));
  EXPECT_TRUE(sameBits(eager, f(x.cpu(), b.cpu())));
}

TEST(CudaDevice, ACubinForAnotherArchitectureIsRefusedByName) {
  SKIP_WITHOUT_GPU();
  runtime::DeviceInterface& gpu = runtime::deviceInterface(kGpu);
  const int sm = codegen::smArchOf(gpu.properties().arch);
  const int other = sm / 10 == 8 ? 90 : 80;  // another major: SASS does not run across majors
  const codegen::CudaBinary bin = codegen::compileCudaToCubin(
      "extern \"C\" __global__ void kiln_other(float* x) { x[0] = 1.0f; }", "kiln_other", other);
  runtime::KernelImage image;
  image.format = runtime::KernelImage::Format::cubin;
  image.name = "kiln_other";
  image.bytes.assign(bin.cubin.begin(), bin.cubin.end());
  const std::string error = errorOf([&] { gpu.loadModule(image); });
  EXPECT_EQ(error.rfind(fmt::format("cuda:0: kernel kiln_other: the cubin was compiled for sm_{}, but cuda:0 is {} "
                                    "(CUDA_ERROR_NO_BINARY_FOR_GPU",
                                    other, gpu.properties().arch),
                        0),
            0u)
      << error;
}

}  // namespace
}  // namespace kiln
