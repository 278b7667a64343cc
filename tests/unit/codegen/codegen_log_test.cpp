// KILN_LOG=codegen and KILN_LOG=cache (runtime/log.h): one line per step
// compileGraph makes (a kernel with its launch shape, a library call with
// its arguments), the in-memory kernel cache's misses and hits and the disk
// cache's misses, stores, hits and damaged entries, each with its key's
// hash; and nothing when off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "codegen/compile_graph.h"
#include "codegen/disk_cache.h"
#include "codegen/kernel_cache.h"
#include "codegen/lowering.h"
#include "common/graph_builders.h"
#include "common/log_capture.h"
#include "passes/passes.h"

namespace kiln {
namespace {

using namespace testutil;
using ir::Op;

/// relu(x + b) over f32[8,4] with b: f32[4] broadcast (one fusion), its
/// product with w: f32[4,3] (a library call) and its row sums (a reduction
/// of its own: fuse-reductions does not run).
std::unique_ptr<ir::Graph> graph() {
  auto g = std::make_unique<ir::Graph>("logged");
  ir::Value* x = g->addInput(f32({8, 4}), "x");
  ir::Value* b = g->addInput(f32({4}), "b");
  ir::Value* w = g->addInput(f32({4, 3}), "w");
  ir::Value* r = un(*g, Op::relu, bin(*g, Op::add, x, b));
  ir::Value* m = bin(*g, Op::matmul, r, w);
  ir::Value* s = g->create(Op::sum, std::vector<ir::Value*>{r}, {{"dims", std::vector<int64_t>{1}}})->output();
  g->setOutputs({m, s});
  passes::PassManager("fuse-elementwise").run(*g);
  return g;
}

template <typename Step>
const Step& step(const runtime::Executable& exe, size_t i) {
  return std::get<Step>(exe.steps.at(i));
}

TEST(CodegenLog, EachStepWithItsLaunchShape) {
  auto g = graph();
  runtime::Executable exe;
  const std::string err = logOf("codegen", [&] { exe = codegen::compileGraph(*g, Device::cpu()); });
  ASSERT_EQ(exe.steps.size(), 3u);
  const auto& fused = step<runtime::KernelStep>(exe, 0);
  const auto& mm = step<runtime::LibraryStep>(exe, 1);
  const auto& sum = step<runtime::KernelStep>(exe, 2);
  std::string mmArgs;
  for (int64_t a : mm.args) mmArgs += (mmArgs.empty() ? "" : ",") + std::to_string(a);
  // The fusion: [8,4] does not coalesce (b is broadcast over the rows), x
  // and the result are row-major, b has stride 0 over the rows; below one
  // grain (32768 elements) it runs on one thread. The sum: one row of 4 per
  // output element, the result indexed by the rows only; a chunk is whole
  // rows, about 32768 elements (8192 rows of 4), at least 64.
  EXPECT_EQ(err, "kiln::codegen: kernel " + fused.name +
                     ": elementwise of rank 2, sizes [8,4], 32 elements, grain 32768, params 0 in f32 strides [4,1]; "
                     "1 in f32 strides [0,1]; 2 out f32 strides [4,1]\n"
                     "kiln::codegen: library call matmul_f32: args [" +
                     mmArgs +
                     "]\n"
                     "kiln::codegen: kernel " +
                     sum.name +
                     ": reduction over the last 1 of 2 dims, sizes [8,4], 8 rows, grain 8192, params 0 in f32 strides "
                     "[4,1]; 1 out (per row) f32 strides [1,0]\n");
  EXPECT_EQ(fused.shape.grain, 32768);
  EXPECT_EQ(sum.shape.grain, 8192);
}

/// cat(x, y) along `dim`, fused.
std::unique_ptr<ir::Graph> catGraph(ir::Shape x, ir::Shape y, int64_t dim) {
  auto g = std::make_unique<ir::Graph>("joined");
  ir::Value* a = g->addInput(f32(std::move(x)), "x");
  ir::Value* b = g->addInput(f32(std::move(y)), "y");
  g->setOutputs({g->create(Op::cat, std::vector<ir::Value*>{a, b}, {{"dim", dim}})->output()});
  passes::PassManager("fuse-elementwise").run(*g);
  return g;
}

TEST(CodegenLog, ACatsPiecesSayWhereInTheResultTheyWrite) {
  // Along the inner dim: two kernels; y's piece starts 3 elements into each
  // row of 7.
  auto g = catGraph({2, 3}, {2, 4}, 1);
  runtime::Executable exe;
  std::string err = logOf("codegen", [&] { exe = codegen::compileGraph(*g, Device::cpu()); });
  ASSERT_EQ(exe.steps.size(), 2u);
  EXPECT_EQ(err, "kiln::codegen: kernel " + step<runtime::KernelStep>(exe, 0).name +
                     ": elementwise of rank 2, sizes [2,3], 6 elements, grain 32768, params 0 in f32 strides [3,1]; 1 "
                     "out f32 strides [7,1]\n"
                     "kiln::codegen: kernel " +
                     step<runtime::KernelStep>(exe, 1).name +
                     ": elementwise of rank 2, sizes [2,4], 8 elements, grain 32768, params 0 in f32 strides [4,1]; 1 "
                     "out f32 strides [7,1] from element 3\n");
  // Along the outer dim each piece is a contiguous run: two copy steps of
  // 2x3 and 4x3 floats, y's into byte 24 of the result.
  g = catGraph({2, 3}, {4, 3}, 0);
  err = logOf("codegen", [&] { exe = codegen::compileGraph(*g, Device::cpu()); });
  ASSERT_EQ(exe.steps.size(), 2u);
  EXPECT_EQ(err, "kiln::codegen: copy " + step<runtime::CopyStep>(exe, 0).name + ": 24 bytes\nkiln::codegen: copy " +
                     step<runtime::CopyStep>(exe, 1).name + ": 48 bytes, from byte 0 into byte 24\n");
}

TEST(CodegenLog, NothingWhenOff) {
  auto g = graph();
  EXPECT_EQ(logOf("", [&] { codegen::compileGraph(*g, Device::cpu()); }), "");
  EXPECT_EQ(logOf("passes,fusion,recompiles", [&] { codegen::compileGraph(*g, Device::cpu()); }), "");
}

TEST(CacheLog, MemoryMissThenHitWithTheKernelsHash) {
  // exp(exp(x)) in f64, compiled twice after the memory cache is cleared.
  auto g = std::make_unique<ir::Graph>("cached");
  ir::Value* x = g->addInput({DType::f64, {3, 5}, Device::cpu()}, "x");
  g->setOutputs({un(*g, Op::exp, un(*g, Op::exp, x))});
  passes::PassManager("fuse-elementwise").run(*g);
  codegen::KernelCache::instance().clear();
  runtime::Executable first, second;
  const std::string err = logOf("cache", [&] {
    first = codegen::compileGraph(*g, Device::cpu());
    second = codegen::compileGraph(*g, Device::cpu());
  });
  ASSERT_EQ(first.steps.size(), 1u);
  const std::string name = step<runtime::KernelStep>(first, 0).name;
  const ir::Node* fusion = g->nodes().back();
  const std::string key = fmt::format("{:016x}", codegen::lowerFusion(*fusion).kernel.hash());
  const std::vector<std::string> memory = linesStartingWith(err, "kiln::cache: memory");
  ASSERT_EQ(memory.size(), 2u) << err;
  EXPECT_TRUE(std::regex_match(memory[0], std::regex("kiln::cache: memory miss " + name + " on cpu \\(key " + key +
                                                     "\\): (compiled|loaded from the disk cache) in [0-9.]+ ms")))
      << memory[0];
  EXPECT_EQ(memory[1], "kiln::cache: memory hit " + name + " on cpu (key " + key + ")");
  EXPECT_EQ(logOf("", [&] { codegen::compileGraph(*g, Device::cpu()); }), "");
}

TEST(CacheLog, DiskMissStoreHitAndDamageWithTheEntrysHash) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_cache_log_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  codegen::DiskCache cache(dir);
  const std::string hash = cache.pathFor("the key").stem().string();  // the file is named by the hash
  ASSERT_EQ(hash.size(), 16u);
  const std::string err = logOf("cache", [&] {
    cache.load("the key");
    cache.store("the key", "12345");
    cache.load("the key");
    std::ofstream(cache.pathFor("the key"), std::ios::app) << "tail";
    cache.load("the key");
  });
  EXPECT_EQ(err, "kiln::cache: disk miss " + hash + "\nkiln::cache: disk store " + hash +
                     " (5 bytes)\nkiln::cache: disk hit " + hash + " (5 bytes)\nkiln::cache: disk miss " + hash +
                     ": the entry is damaged; removed\n");
  EXPECT_EQ(logOf("passes,fusion,codegen,recompiles", [&] { cache.load("the key"); }), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
