// The C-family GPU renderer's structure, in both dialects, on every kernel
// of gpu_kernel_cases.h: every OpenCL kernel turns FP contraction off;
// every barrier is reached by every work-item (never inside a branch or a
// loop whose trip count depends on the work-item, no early return); no
// spelling of one dialect leaks into the other; no device math library
// call; the launch shapes and argument words a driver reads; and malformed
// kernels are kiln bugs. Whether the text compiles is gpu_build_test.cpp's
// job, whether it computes the right values opencl_run_test.cpp's.
#include "codegen/c_renderer.h"

#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "unit/codegen/gpu_kernel_cases.h"

namespace kiln::codegen {
namespace {

using namespace instr;
using namespace testing;
using ir::Op;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// `src` without its // comments, which name ops ("// %3 = exp(%2)") and flags.
std::string codeOnly(const std::string& src) {
  std::string code;
  size_t at = 0;
  while (at < src.size()) {
    size_t end = src.find('\n', at);
    if (end == std::string::npos) end = src.size();
    const std::string line = src.substr(at, end - at);
    code += line.substr(0, line.find("//")) + "\n";
    at = end + 1;
  }
  return code;
}

/// A token of C code (an identifier, keyword or number, split at anything
/// but letters, digits and `_`) and the character after it (blanks skipped).
struct Token {
  std::string text;
  char next;
};

std::vector<Token> tokens(const std::string& code) {
  std::vector<Token> out;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = 0; at < code.size();) {
    if (!word(code[at])) {
      ++at;
      continue;
    }
    const size_t start = at;
    while (at < code.size() && word(code[at])) ++at;
    size_t next = at;
    while (next < code.size() && code[next] == ' ') ++next;
    out.push_back({code.substr(start, at - start), next < code.size() ? code[next] : '\0'});
  }
  return out;
}

const std::vector<Kernel>& kernels() {
  static const std::vector<Kernel> all = allGpuKernels();
  return all;
}

/// A barrier of a kernel: its statement, and the headers of the blocks it
/// is nested in (the kernel's own head first).
struct Barrier {
  std::string statement;
  std::vector<std::string> nest;
};

/// The barriers of `src`: statements end at `;` outside parentheses, blocks
/// open at `{` after their header.
std::vector<Barrier> barriers(const std::string& src, const std::string& barrier) {
  std::vector<Barrier> found;
  std::vector<std::string> open;  // the header of each open block
  std::string text;               // since the last statement or block boundary
  int parens = 0;
  for (char c : codeOnly(src)) {
    if (c == '(') ++parens;
    if (c == ')') --parens;
    if (c == '{' && parens == 0) {
      open.push_back(text);
      text.clear();
    } else if (c == '}' && parens == 0) {
      if (!open.empty()) open.pop_back();
      text.clear();
    } else if (c == ';' && parens == 0) {
      if (contains(text, barrier)) found.push_back({text, open});
      text.clear();
    } else {
      text += c == '\n' ? ' ' : c;
    }
  }
  return found;
}

TEST(CRenderer, EveryKernelRendersInBothDialectsTheSameWayEachTime) {
  for (const Kernel& k : kernels()) {
    const std::string cuda = renderCudaC(k), opencl = renderOpenCLC(k);
    EXPECT_EQ(cuda, renderCudaC(k)) << k.name;
    EXPECT_EQ(opencl, renderOpenCLC(k)) << k.name;
    EXPECT_NE(cuda, opencl) << k.name;
    EXPECT_EQ(count(cuda, "extern \"C\" __global__ void"), 1) << cuda;
    EXPECT_EQ(count(opencl, "__kernel "), 1) << opencl;
  }
  EXPECT_GT(kernels().size(), 250u);
}

TEST(CRenderer, EveryOpenCLKernelTurnsOffContractionBeforeItsCode) {
  std::string program;
  for (const Kernel& k : kernels()) {
    const std::string src = codeOnly(renderOpenCLC(k));
    const size_t pragma = src.find("#pragma OPENCL FP_CONTRACT OFF\n");
    ASSERT_NE(pragma, std::string::npos) << src;
    EXPECT_LT(pragma, src.find("__kernel")) << src;
    EXPECT_LT(pragma, src.find("struct KilnArgs_")) << "before any code: " << src;
    program += src;
  }
  // Concatenated into one program, each kernel still has its own.
  EXPECT_EQ(count(program, "#pragma OPENCL FP_CONTRACT OFF"), count(program, "__kernel "));
}

TEST(CRenderer, EveryWorkItemReachesEveryBarrier) {
  // A barrier inside a branch, or inside a loop whose trip count depends on
  // the work-item, or after a return, crashes PoCL and hangs a GPU.
  const std::set<std::string> perItem = {"tid", "lane", "warp", "r", "i", "v"};
  int total = 0;
  for (const Kernel& k : kernels()) {
    for (const auto& [src, barrier] : {std::pair{renderCudaC(k), std::string("__syncthreads()")},
                                       std::pair{renderOpenCLC(k), std::string("barrier(")}}) {
      const std::string code = codeOnly(src);
      for (const Token& t : tokens(code.substr(code.find(k.name + "(")))) EXPECT_NE(t.text, "return") << src;
      const std::vector<Barrier> found = barriers(src, barrier);
      EXPECT_EQ(found.empty(), !k.isReduction()) << src;
      for (const Barrier& b : found) {
        ++total;
        // Not the body of a braceless if, for or while.
        EXPECT_EQ(b.statement.find_first_not_of(" "), b.statement.find(barrier))
            << "a barrier in `" << b.statement << "`";
        ASSERT_FALSE(b.nest.empty()) << src;
        EXPECT_TRUE(contains(b.nest[0], k.name + "(")) << "not in the kernel's own body: " << b.nest[0];
        for (size_t n = 1; n < b.nest.size(); ++n) {
          const std::string& header = b.nest[n];
          EXPECT_EQ(header.find_first_not_of(" "), header.find("for (")) << "a barrier in `" << header << "`";
          // The loop's condition and step name no per-work-item value.
          for (const Token& t : tokens(header.substr(header.find(';'))))
            EXPECT_EQ(perItem.count(t.text), 0u) << "a barrier in `" << header << "`";
        }
      }
    }
  }
  EXPECT_GT(total, 100);
}

TEST(CRenderer, NoSpellingOfOneDialectInTheOther) {
  // C++ and CUDA in OpenCL C (C99, where `long long` is reserved), OpenCL in CUDA C.
  const std::set<std::string> cudaOnly = {"__global__",        "__shared__", "__syncthreads", "threadIdx",
                                          "blockIdx",          "blockDim",   "gridDim",       "__shfl_down_sync",
                                          "reinterpret_cast",  "unsigned",   "__restrict__",  "__device__",
                                          "__forceinline__",   "extern",     "sqrtf",         "rintf",
                                          "__launch_bounds__", "__align__"};
  const std::set<std::string> openclOnly = {"__kernel",       "__global",       "__local",
                                            "get_local_id",   "get_group_id",   "get_global_id",
                                            "get_num_groups", "get_local_size", "get_global_size",
                                            "barrier",        "vload4",         "vstore4",
                                            "as_float",       "as_uint",        "as_int",
                                            "as_long",        "as_double",      "ulong",
                                            "ushort",         "uchar",          "uint",
                                            "restrict",       "OPENCL",         "reqd_work_group_size"};
  auto number = [](const std::string& t) { return std::isdigit(static_cast<unsigned char>(t[0])); };
  for (const Kernel& k : kernels()) {
    const std::string cuda = codeOnly(renderCudaC(k)), opencl = codeOnly(renderOpenCLC(k));
    const std::vector<Token> inOpenCL = tokens(opencl), inCuda = tokens(cuda);
    for (size_t t = 0; t < inOpenCL.size(); ++t) {
      const std::string& w = inOpenCL[t].text;
      const bool cudaSpelling = cudaOnly.count(w) || (w.starts_with("__") && contains(w, "_as_")) ||
                                (w == "long" && t + 1 < inOpenCL.size() && inOpenCL[t + 1].text == "long") ||
                                (number(w) && w.ends_with("ll"));
      EXPECT_FALSE(cudaSpelling) << "`" << w << "` in OpenCL C:\n" << opencl;
      if (cudaSpelling) break;
    }
    for (const Token& t : inCuda) {
      const bool openclSpelling = openclOnly.count(t.text) || (number(t.text) && t.text.ends_with("L"));
      EXPECT_FALSE(openclSpelling) << "`" << t.text << "` in CUDA C:\n" << cuda;
      if (openclSpelling) break;
    }
  }
}

TEST(CRenderer, NoDeviceMathLibraryNoHeadersNoContraction) {
  // Every op is kiln's own formula (Note [Eager equals compiled]); only
  // sqrt and rint, correctly rounded in both dialects, are the device's.
  const std::set<std::string> calls = {"fma",    "fmaf",   "mad",    "exp",    "expf",    "exp2",  "exp2f", "log",
                                       "logf",   "log2",   "log2f",  "tanh",   "tanhf",   "pow",   "powf",  "sin",
                                       "sinf",   "cos",    "cosf",   "sincos", "sincosf", "erf",   "erff",  "rsqrt",
                                       "rsqrtf", "__expf", "__logf", "__sinf", "__cosf",  "__powf"};
  for (const Kernel& k : kernels())
    for (const std::string& src : {renderCudaC(k), renderOpenCLC(k)}) {
      const std::string code = codeOnly(src);
      EXPECT_FALSE(contains(code, "#include")) << src;
      for (const Token& t : tokens(code)) {
        const bool banned = (t.next == '(' && (calls.count(t.text) || t.text.starts_with("__fma") ||
                                               t.text.starts_with("native_") || t.text.starts_with("half_"))) ||
                            t.text == "INFINITY" || t.text == "NAN";
        EXPECT_FALSE(banned) << "`" << t.text << "` in\n" << src;
        if (banned) break;
      }
    }
}

const Kernel& named(const std::string& name) {
  for (const Kernel& k : kernels())
    if (k.name == name) return k;
  throw std::runtime_error("no kernel " + name);
}

TEST(CRenderer, LaunchesSayWhatTheKernelsExpect) {
  const RenderedKernel vector = renderGpuKernel(named("kiln_every_op"), openclDialect());
  EXPECT_EQ(vector.launch.unit, GpuLaunch::Unit::vector4);
  EXPECT_FALSE(vector.launch.localSizeRequired);
  EXPECT_EQ(vector.launch.sharedBytes, 0);
  const RenderedKernel strided = renderGpuKernel(named("kiln_add_bias_n"), cudaDialect());
  EXPECT_EQ(strided.launch.unit, GpuLaunch::Unit::element);
  // Reductions require their group size and declare their trees' memory:
  // argmax of f32 a float and an index per warp (CUDA) or per work-item (OpenCL).
  for (const auto& [d, bytes] : {std::pair{&cudaDialect(), 32 * (4 + 8)}, std::pair{&openclDialect(), 256 * (4 + 8)}}) {
    const RenderedKernel argmax = renderGpuKernel(named("kiln_argmax_f32"), *d);
    EXPECT_EQ(argmax.launch.unit, GpuLaunch::Unit::row);
    EXPECT_TRUE(argmax.launch.localSizeRequired);
    EXPECT_EQ(argmax.launch.localSize, 256);
    EXPECT_EQ(argmax.launch.sharedBytes, bytes) << d->name();
    // A sum of f32 accumulates in f64: 8 bytes each.
    EXPECT_EQ(renderGpuKernel(named("kiln_sum_f32"), *d).launch.sharedBytes, bytes / 12 * 8) << d->name();
  }
  // Groups: one element (or vector of four) per work-item, one row per
  // group, at most maxGroups (the loops stride over the rest), none for nothing.
  EXPECT_EQ(strided.launch.groups(1501, 100), 6);
  EXPECT_EQ(strided.launch.groups(1501, 4), 4);
  EXPECT_EQ(strided.launch.globalSize(1501, 4), 1024);
  EXPECT_EQ(vector.launch.groups(1501, 100), 2);  // 376 vectors
  EXPECT_EQ(vector.launch.groups(1024, 100), 1);
  EXPECT_EQ(vector.launch.groups(1025, 100), 2);
  const RenderedKernel rows = renderGpuKernel(named("kiln_max_f32"), cudaDialect());
  EXPECT_EQ(rows.launch.groups(23, 100), 23);
  EXPECT_EQ(rows.launch.groups(23, 5), 5);
  for (const RenderedKernel* r : {&vector, &strided, &rows}) EXPECT_EQ(r->launch.groups(0, 100), 0);
  // As the device interface takes it: static shared memory is the kernel's own.
  const runtime::LaunchShape shape = rows.launch.shape(23, 5);
  EXPECT_EQ(shape.numel, 23);
  EXPECT_EQ(shape.grid, (std::array<int64_t, 3>{5, 1, 1}));
  EXPECT_EQ(shape.block, (std::array<int64_t, 3>{256, 1, 1}));
  EXPECT_EQ(shape.sharedBytes, 0u);
}

TEST(CRenderer, ArgumentWordsAreTheLaunchArgsThenNumelThenOpenCLOffsets) {
  // Rank 2, four params, one index space: 2 sizes, 5 x 2 strides, numel.
  const Kernel& k = named("kiln_dropout_f32_s");
  ASSERT_EQ(k.rank, 2);
  const RenderedKernel cuda = renderGpuKernel(k, cudaDialect()), opencl = renderGpuKernel(k, openclDialect());
  EXPECT_EQ(cuda.argWords, 13);
  EXPECT_EQ(opencl.argWords, 17);
  EXPECT_EQ(cuda.numBuffers, 4);
  LaunchArgs launch;
  for (int i = 0; i < 12; ++i) launch.args.push_back(100 + i);
  launch.numel = 77;
  std::vector<int64_t> want = launch.args;
  want.push_back(77);
  EXPECT_EQ(packGpuArgs(cuda, launch), want);
  const std::vector<int64_t> offsets = {5, 0, 0, 9};
  want.insert(want.end(), offsets.begin(), offsets.end());
  EXPECT_EQ(packGpuArgs(opencl, launch, offsets), want);
  EXPECT_THROW(packGpuArgs(opencl, launch, {1, 2}), InternalError);
  EXPECT_THROW(packGpuArgs(cuda, launch, offsets), InternalError) << "CUDA offsets its pointers instead";
}

TEST(CRenderer, ALoadOfAnotherDtypeThanItsParamIsAKilnBug) {
  Kernel k = named("kiln_add_bias_1");
  k.params[1].dtype = DType::f16;
  for (const CDialect* d : {&cudaDialect(), &openclDialect()}) {
    try {
      renderGpuKernel(k, *d);
      FAIL() << "expected kiln::InternalError";
    } catch (const InternalError& e) {
      EXPECT_TRUE(contains(e.what(), "kiln_add_bias_1")) << e.what();
      EXPECT_TRUE(contains(e.what(), "loads f32 from param 1 of f16")) << e.what();
    }
  }
}

TEST(CRenderer, MalformedBodyIsAKilnBug) {
  Kernel k = named("kiln_add_bias_1");
  k.body[2].operands = {0, 3};  // %3 is the store, after %2
  EXPECT_THROW(renderCudaC(k), InternalError);
  EXPECT_THROW(renderOpenCLC(k), InternalError);
}

}  // namespace
}  // namespace kiln::codegen
