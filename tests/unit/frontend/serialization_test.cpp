// kiln::save and kiln::load (frontend/serialization.h), the safetensors
// format: a file the reference implementation wrote (committed, made by
// tests/reference/safetensors/make_fixture.py) reads as it should; every
// dtype, 0-d and empty tensors and views round-trip with their metadata;
// tensors load straight to a device; a file kiln writes reads back in the
// reference implementation (when Python's safetensors is installed, else
// skipped with the reason); truncated and corrupt files, and unwritable
// paths, get errors naming the file and what is wrong; a crash in the
// middle of a save (a child process that dies there) leaves the previous
// file whole; a module's state dict goes through a file into another
// module, and loading one with missing, unexpected or misshapen entries
// names them.
#include "frontend/serialization.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/source_dir.h"
#include "frontend/kiln.h"
#include "runtime/device_interface.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln-serialization-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void writeFile(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

::testing::AssertionResult equal(const Tensor& a, const Tensor& b) {
  if (a.type() != b.type()) return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const std::vector<double> x = a.to(DType::f64).toVector<double>(), y = b.to(DType::f64).toVector<double>();
  if (a.dtype() == DType::i64) {
    if (a.toVector<int64_t>() != b.toVector<int64_t>()) return ::testing::AssertionFailure() << "i64 values differ";
  } else if (x != y) {
    return ::testing::AssertionFailure() << "values differ";
  }
  return ::testing::AssertionSuccess();
}

TEST(Safetensors, ReadsTheFileTheReferenceImplementationWrote) {
  const fs::path fixture = testutil::sourceDir() / "tests/reference/safetensors/reference.safetensors";
  const SafetensorsFile f = load(fixture.string());
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"written_by", "safetensors"}}));
  ASSERT_EQ(f.tensors.size(), 9u);
  EXPECT_EQ(f.tensors.at("f32").shape(), (Shape{2, 3}));
  EXPECT_EQ(f.tensors.at("f32").toVector<float>(), (std::vector<float>{0.0f, 1.5f, -2.0f, 3.25f, 4.0f, -0.5f}));
  EXPECT_EQ(f.tensors.at("f64").toVector<double>(), (std::vector<double>{1.0, -1.0, 0.125}));
  EXPECT_EQ(f.tensors.at("f16").dtype(), DType::f16);
  EXPECT_EQ(f.tensors.at("f16").to(DType::f32).toVector<float>(), (std::vector<float>{0.5f, -1.5f, 2.0f, 1024.0f}));
  EXPECT_EQ(f.tensors.at("bf16").dtype(), DType::bf16);
  EXPECT_EQ(f.tensors.at("bf16").to(DType::f32).toVector<float>(), (std::vector<float>{1.0f, -2.5f, 0.75f, 256.0f}));
  EXPECT_EQ(f.tensors.at("i32").shape(), (Shape{2, 1}));
  EXPECT_EQ(f.tensors.at("i32").toVector<int32_t>(), (std::vector<int32_t>{-7, 2147483647}));
  EXPECT_EQ(f.tensors.at("i64").toVector<int64_t>(), (std::vector<int64_t>{-(int64_t{1} << 62), 9007199254740993}));
  EXPECT_EQ(f.tensors.at("bool").toVector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(f.tensors.at("scalar").shape(), Shape{});
  EXPECT_EQ(f.tensors.at("scalar").item(), 42.0f);
  EXPECT_EQ(f.tensors.at("empty").shape(), (Shape{0, 4}));
  // In the file's data order (the reference sorts by dtype size, then name).
  EXPECT_EQ(f.tensors.items().front().first, "i64");
}

TensorDict everyDType() {
  Generator gen(7);
  const Tensor x = randn({3, 4}, gen);
  TensorDict d;
  d.insert("weight", x);
  d.insert("transposed view", x.t());  // written contiguous
  d.insert("f64", randn({5}, gen).to(DType::f64));
  d.insert("f16", x.to(DType::f16));
  d.insert("bf16", x.to(DType::bf16));
  d.insert("i32", fromVector(std::vector<int32_t>{1, -2, 3}, {3}));
  d.insert("i64", fromVector(std::vector<int64_t>{int64_t{1} << 60, -5}, {2}));
  d.insert("bool", gt(x, 0.0));
  d.insert("scalar", fromVector(std::vector<double>{2.5}, Shape{}));
  d.insert("empty", zeros({0, 3}));
  return d;
}

TEST(Safetensors, EveryDTypeViewsScalarsAndEmptyTensorsRoundTrip) {
  const fs::path p = scratch("round.safetensors");
  const TensorDict d = everyDType();
  save(d, p.string(), {{"step", "5"}, {"what", "a test"}});
  const std::string bytes = readFile(p);
  uint64_t headerLength = 0;
  std::memcpy(&headerLength, bytes.data(), 8);
  EXPECT_EQ(headerLength % 8, 0u) << "the data starts 8-byte aligned";
  const SafetensorsFile f = load(p.string());
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"step", "5"}, {"what", "a test"}}));
  ASSERT_EQ(f.tensors.size(), d.size());
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(f.tensors.items()[i].first, d.items()[i].first) << "order";
    EXPECT_TRUE(equal(f.tensors.items()[i].second, d.items()[i].second)) << d.items()[i].first;
  }
  EXPECT_TRUE(f.tensors.at("transposed view").isContiguous());
}

TEST(Safetensors, LoadsStraightToADevice) {
  const Device device = Device::opencl();
  std::string why;
  if (!runtime::isDeviceAvailable(device, &why)) GTEST_SKIP() << "no OpenCL device: " << why;
  const fs::path p = scratch("device.safetensors");
  save(everyDType(), p.string());
  const SafetensorsFile f = load(p.string(), device);
  for (const auto& [name, t] : f.tensors.items()) {
    EXPECT_EQ(t.device(), device) << name;
    EXPECT_TRUE(equal(t.to(Device::cpu()), everyDType().at(name))) << name;
  }
}

TEST(Safetensors, TheReferenceImplementationReadsWhatKilnWrites) {
  const fs::path p = scratch("for-python.safetensors");
  TensorDict d;
  d.insert("b", fromVector(std::vector<float>{1.5f, -2.0f}, {2}));
  d.insert("a", fromVector(std::vector<int64_t>{3, 4, 5, 6}, {2, 2}));
  d.insert("flag", fromVector(std::vector<bool>{false, true}, {2}));
  save(d, p.string(), {{"format", "pt"}});
  const fs::path script = testutil::sourceDir() / "tests/reference/safetensors/describe.py";
  const std::string out = p.string() + ".txt";
  const int rc = std::system(("python3 " + script.string() + " " + p.string() + " > " + out + " 2>&1").c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 2) GTEST_SKIP() << "reference implementation unavailable: " << readFile(out);
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << readFile(out);
  EXPECT_EQ(readFile(out),
            "a I64 2x2 0300000000000000040000000000000005000000000000000600000000000000\n"
            "b F32 2 0000c03f000000c0\n"
            "flag BOOL 2 0001\n"
            "metadata format=pt\n");
}

TEST(Safetensors, TruncatedAndCorruptFilesNameTheFileAndWhatIsWrong) {
  const fs::path good = scratch("good.safetensors");
  TensorDict d;
  d.insert("w", fromVector(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  d.insert("b", fromVector(std::vector<float>{5, 6}, {2}));
  save(d, good.string());
  const std::string bytes = readFile(good);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const fs::path bad = scratch("bad.safetensors");
  auto loadOf = [&](const std::string& content) {
    writeFile(bad, content);
    return errorOf([&] { load(bad.string()); });
  };
  // Cut anywhere: in the length, in the header, in the data.
  for (size_t cut : {size_t{0}, size_t{5}, size_t{8} + n / 2, bytes.size() - 1, bytes.size() - 9}) {
    const std::string e = loadOf(bytes.substr(0, cut));
    EXPECT_NE(e.find(bad.string()), std::string::npos) << cut << ": " << e;
    EXPECT_TRUE(e.find("truncated") != std::string::npos || e.find("fewer than the 8") != std::string::npos)
        << cut << ": " << e;
  }
  // A header that is not JSON.
  std::string corrupt = bytes;
  corrupt[8] = '[';
  corrupt[9] = '}';
  EXPECT_NE(loadOf(corrupt).find("its header is not valid JSON"), std::string::npos) << loadOf(corrupt);
  // A header that is JSON but not the format's: a dtype kiln lacks, sizes
  // that do not match, overlapping tensors, a missing field.
  auto withHeader = [&](const std::string& json) {
    std::string h = json;
    h.append((8 - h.size() % 8) % 8, ' ');
    std::string file(8, '\0');
    const uint64_t len = h.size();
    std::memcpy(file.data(), &len, 8);
    return loadOf(file + h + std::string(24, '\0'));
  };
  std::string e = withHeader(R"({"x": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})");
  EXPECT_NE(e.find("tensor 'x' has dtype U8, which kiln has none for"), std::string::npos) << e;
  e = withHeader(R"({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}})");
  EXPECT_NE(e.find("tensor 'x': data_offsets [0, 8] hold 8 bytes, but F32 [4] needs 16"), std::string::npos) << e;
  e = withHeader(R"({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                     "y": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})");
  EXPECT_NE(e.find("tensors 'x' and 'y' overlap"), std::string::npos) << e;
  e = withHeader(R"({"x": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})");
  EXPECT_NE(e.find("truncated: tensor 'x' ends at byte 32 of the data, which has 24 bytes"), std::string::npos) << e;
  e = withHeader(R"({"x": {"dtype": "F32", "data_offsets": [0, 4]}})");
  EXPECT_NE(e.find("tensor 'x' needs dtype, shape and data_offsets"), std::string::npos) << e;
  e = withHeader(R"({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})");
  EXPECT_NE(e.find("has a dimension that is not a size"), std::string::npos) << e;
  e = errorOf([&] { load(scratch("missing.safetensors").string()); });
  EXPECT_NE(e.find("cannot read " + scratch("missing.safetensors").string()), std::string::npos) << e;
  e = errorOf([&] { save(d, "/nonexistent-dir/x.safetensors"); });
  EXPECT_NE(e.find("cannot write /nonexistent-dir/x.safetensors"), std::string::npos) << e;
}

TEST(Safetensors, ACrashMidSaveLeavesThePreviousFileWhole) {
  const fs::path p = scratch("checkpoint.safetensors");
  TensorDict before;
  before.insert("w", fromVector(std::vector<float>{1, 2, 3}, {3}));
  save(before, p.string());
  TensorDict after;
  after.insert("w", zeros({1 << 16}));  // 256 KiB: written in several pieces
  after.insert("v", zeros({1 << 16}));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The crash: the process dies once part of the new file is written.
    detail::saveProgressHook() = [](size_t written) {
      if (written > 1000) ::_exit(3);
    };
    save(after, p.string());
    ::_exit(0);  // not reached when the hook fires
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit";
  ASSERT_EQ(WEXITSTATUS(status), 3) << "the child finished the save: no crash was simulated";
  const SafetensorsFile f = load(p.string());
  EXPECT_TRUE(equal(f.tensors.at("w"), before.at("w")));
  EXPECT_FALSE(f.tensors.contains("v"));
}

TEST(Safetensors, AStateDictGoesThroughAFileIntoAnotherModule) {
  manualSeed(3);
  nn::Linear a(4, 3), b(4, 3);
  const fs::path p = scratch("linear.safetensors");
  save(a->stateDict(), p.string());
  b->loadStateDict(load(p.string()).tensors);
  EXPECT_TRUE(equal(b->weight, a->weight));
  EXPECT_TRUE(equal(b->bias, a->bias));
  // Missing, unexpected and misshapen entries are named.
  TensorDict partial;
  partial.insert("weight", a->weight.detach());
  partial.insert("extra", zeros({2}));
  save(partial, p.string());
  const std::string e = errorOf([&] { b->loadStateDict(load(p.string()).tensors); });
  EXPECT_NE(e.find("bias"), std::string::npos) << e;
  EXPECT_NE(e.find("extra"), std::string::npos) << e;
  const nn::LoadStateDictResult r = b->loadStateDict(load(p.string()).tensors, false);
  EXPECT_EQ(r.missingKeys, std::vector<std::string>{"bias"});
  EXPECT_EQ(r.unexpectedKeys, std::vector<std::string>{"extra"});
  TensorDict wrong;
  wrong.insert("weight", zeros({3, 5}));
  wrong.insert("bias", zeros({3}));
  save(wrong, p.string());
  const std::string shape = errorOf([&] { b->loadStateDict(load(p.string()).tensors); });
  EXPECT_NE(shape.find("weight"), std::string::npos) << shape;
  EXPECT_NE(shape.find("[3,5]"), std::string::npos) << shape;
}

}  // namespace
}  // namespace kiln
