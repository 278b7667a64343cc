// Unit tests for the runtime's vocabulary: DType names, sizes and parsing for
// every dtype; Device parsing, printing and its errors; CUDA availability in
// this build; and the two error paths, KILN_CHECK (kiln::Error with a
// fmt-formatted message) and KILN_ASSERT (kiln::InternalError that says it is
// a kiln bug and where).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/device.h"
#include "runtime/device_interface.h"
#include "runtime/dtype.h"
#include "runtime/error.h"

namespace kiln {
namespace {

// What each dtype is, from its IEEE / C definition rather than from the table.
struct DTypeCase {
  DType dtype;
  const char* name;
  int64_t bytes;
  bool floating;
};
constexpr DTypeCase kDTypes[] = {
    {DType::f32, "f32", 4, true},       {DType::f16, "f16", 2, true},  {DType::bf16, "bf16", 2, true},
    {DType::f64, "f64", 8, true},       {DType::i32, "i32", 4, false}, {DType::i64, "i64", 8, false},
    {DType::boolean, "bool", 1, false},
};

TEST(DType, NamesSizesAndKindsOfEveryDType) {
  ASSERT_EQ(std::size(kDTypes), static_cast<size_t>(kNumDTypes));
  for (const DTypeCase& c : kDTypes) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(dtypeName(c.dtype), c.name);
    EXPECT_EQ(itemSize(c.dtype), c.bytes);
    EXPECT_EQ(isFloatingPoint(c.dtype), c.floating);
  }
}

TEST(DType, ParseRoundTripsEveryName) {
  std::set<std::string_view> names;
  for (int i = 0; i < kNumDTypes; ++i) {
    auto dtype = static_cast<DType>(i);
    names.insert(dtypeName(dtype));
    auto parsed = parseDType(dtypeName(dtype));
    ASSERT_TRUE(parsed.has_value()) << dtypeName(dtype);
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kNumDTypes)) << "two dtypes share a name";
}

TEST(DType, ParseRejectsUnknownNames) {
  for (const char* bad : {"", "float32", "F32", "f32 ", "boolean", "i8", "f"}) {
    EXPECT_FALSE(parseDType(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(Device, ParsesCpuCudaAndIndexedCuda) {
  Device cpu = Device::parse("cpu");
  EXPECT_TRUE(cpu.isCpu());
  EXPECT_EQ(cpu, Device::cpu());
  EXPECT_EQ(cpu.str(), "cpu");

  Device cuda = Device::parse("cuda");
  EXPECT_TRUE(cuda.isCuda());
  EXPECT_EQ(cuda.index(), 0);
  EXPECT_EQ(cuda.str(), "cuda:0");

  Device cuda3 = Device::parse("cuda:3");
  EXPECT_TRUE(cuda3.isCuda());
  EXPECT_FALSE(cuda3.isCpu());
  EXPECT_EQ(cuda3.index(), 3);
  EXPECT_EQ(cuda3, Device::cuda(3));
  EXPECT_NE(cuda3, Device::cuda(2));
  EXPECT_NE(cuda3, Device::cpu());
  EXPECT_EQ(cuda3.str(), "cuda:3");
  EXPECT_EQ(Device::parse("cuda:17").index(), 17);
}

TEST(Device, StrParsesBack) {
  for (Device d : {Device::cpu(), Device::cuda(0), Device::cuda(1), Device::cuda(12), Device::opencl(0),
                   Device::opencl(3)})
    EXPECT_EQ(Device::parse(d.str()), d) << d.str();
  EXPECT_EQ(Device::parse("opencl"), Device::opencl(0));
  EXPECT_EQ(Device::opencl(2).str(), "opencl:2");
  EXPECT_NE(Device::opencl(0), Device::cuda(0));
}

TEST(Device, ParseErrorsNameTheText) {
  for (const char* bad : {"cuda:", "cuda:x", "gpu", "", "CPU", "cuda:-1", "cuda:1x", "cuda:+1", " cpu", "cuda0",
                          "cuda:99999999999999999999", "opencl:", "opencl:x", "cpu:0", "OpenCL:0"}) {
    SCOPED_TRACE(bad);
    try {
      Device::parse(bad);
      ADD_FAILURE() << "parsed";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + std::string(bad) + "'"), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind("device: ", 0), 0u) << msg;
      EXPECT_NE(msg.find("cuda:N"), std::string::npos) << "should say what is expected: " << msg;
    }
  }
}

TEST(Device, CudaIsUnavailableWithAReason) {
  std::string why;
  EXPECT_FALSE(cudaAvailable(&why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(cudaAvailable());  // a null `why` is allowed
  EXPECT_EQ(deviceCount(DeviceType::cuda), 0);
  // best() falls back to OpenCL when there is an OpenCL device, else the CPU.
  EXPECT_EQ(Device::best(), isAvailable(DeviceType::opencl) ? Device::opencl(0) : Device::cpu());
}

TEST(Device, DevicesListsTheCpuFirstAndEveryUsableDevice) {
  const std::vector<Device> all = devices();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front(), Device::cpu());
  EXPECT_EQ(static_cast<int>(all.size()), 1 + deviceCount(DeviceType::opencl) + deviceCount(DeviceType::cuda));
  for (const Device& d : all) EXPECT_TRUE(runtime::isDeviceAvailable(d)) << d.str();
  std::string why;
  EXPECT_TRUE(isAvailable(DeviceType::cpu, &why));
  EXPECT_TRUE(why.empty());
}

TEST(Device, TheDefaultDeviceIsPerThreadAndGuardedForAScope) {
  EXPECT_EQ(defaultDevice(), Device::cpu());
  const Device other = isAvailable(DeviceType::opencl) ? Device::opencl(0) : Device::cpu();
  {
    DeviceGuard guard(other);
    EXPECT_EQ(defaultDevice(), other);
    Device seen = Device::cuda(5);
    std::thread([&] { seen = defaultDevice(); }).join();
    EXPECT_EQ(seen, Device::cpu()) << "another thread keeps its own default";
  }
  EXPECT_EQ(defaultDevice(), Device::cpu());
  // An unusable device is refused, naming it and why.
  try {
    setDefaultDevice(Device::cuda(3));
    ADD_FAILURE() << "cuda:3 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("setDefaultDevice: cuda:3 cannot be used: ", 0), 0u) << e.what();
  }
  EXPECT_EQ(defaultDevice(), Device::cpu());
}

TEST(Errors, KilnCheckThrowsErrorWithFormattedMessage) {
  try {
    KILN_CHECK(1 + 1 == 3, "add: expected {} inputs, got {} ({})", 2, 3, "f32[2]@cpu");
    FAIL() << "KILN_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "add: expected 2 inputs, got 3 (f32[2]@cpu)");
  }
  // A user error is a std::runtime_error, not a logic error.
  EXPECT_THROW(KILN_CHECK(false, "x"), std::runtime_error);
}

TEST(Errors, KilnCheckEvaluatesItsConditionOnceAndPassesWhenTrue) {
  int evaluations = 0;
  EXPECT_NO_THROW(KILN_CHECK(++evaluations == 1, "never"));
  EXPECT_EQ(evaluations, 1);
  // Arguments of a passing check are not formatted (a bad format would throw).
  EXPECT_NO_THROW(KILN_CHECK(true, "{}", "unused"));
}

TEST(Errors, FailFormatsLikeFmt) {
  try {
    fail("{}: {:.2f} and {}", "op", 1.0 / 3.0, 42);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "op: 0.33 and 42");
  }
}

TEST(Errors, KilnAssertThrowsInternalErrorSayingKilnBug) {
  const int line = __LINE__ + 2;
  try {
    KILN_ASSERT(2 + 2 == 5, "table has {} rows", 7);
    FAIL() << "KILN_ASSERT did not throw";
  } catch (const Error&) {
    FAIL() << "an internal error must not be a kiln::Error (user code catches those)";
  } catch (const InternalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kiln bug"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 + 2 == 5"), std::string::npos) << "names the condition: " << msg;
    EXPECT_NE(msg.find("table has 7 rows"), std::string::npos) << msg;
    EXPECT_NE(msg.find("basics_test.cpp:" + std::to_string(line)), std::string::npos) << "names file:line: " << msg;
  }
  EXPECT_THROW(KILN_ASSERT(false, "x"), std::logic_error);
}

TEST(Errors, KilnAssertWithoutMessage) {
  try {
    KILN_ASSERT(false);
    FAIL();
  } catch (const InternalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("kiln bug"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("failed:"), std::string::npos) << "no dangling separator without a message: " << msg;
  }
  EXPECT_NO_THROW(KILN_ASSERT(true, "fine"));
}

}  // namespace
}  // namespace kiln
