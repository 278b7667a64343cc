// dropout in kernels: the index space lowering gives it (the element's
// row-major index in dropout's own result, through broadcasting into a
// larger fused domain, transposed operands and coalescing), CPU kernels run
// against a reference written with runtime::philox4x32_10, and the kernel
// checker's rules for index operands. (GPU kernels with dropout, of every
// float dtype, are built and run by the tests of gpu_kernel_cases.h.)
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/cpu_compiler.h"
#include "codegen/kernel.h"
#include "common/graph_builders.h"
#include "frontend/kiln.h"
#include "passes/passes.h"
#include "runtime/buffer.h"
#include "runtime/error.h"
#include "runtime/executable.h"
#include "runtime/philox.h"

namespace kiln::codegen {
namespace {

using ir::Op;
using testutil::f32;

const ir::TensorType kI64{DType::i64, {}, Device::cpu()};

bool keeps(uint64_t seed, uint64_t offset, uint64_t i, double p) {
  auto lo = [](uint64_t v) { return static_cast<uint32_t>(v); };
  auto hi = [](uint64_t v) { return static_cast<uint32_t>(v >> 32); };
  // Element i takes word i % 4 of the block of counter {i / 4, offset}.
  const auto r = runtime::philox4x32_10({lo(i / 4), hi(i / 4), lo(offset), hi(offset)}, {lo(seed), hi(seed)});
  return static_cast<double>(runtime::uniformFromBits(r[i % 4])) > p;
}

ir::Value* dropout(ir::Graph& g, ir::Value* x, ir::Value* seed, ir::Value* offset, double p) {
  return g.create(Op::dropout, std::vector<ir::Value*>{x, seed, offset}, {{"p", p}})->output();
}

std::shared_ptr<runtime::Buffer> bufferOf(const void* data, size_t bytes) {
  auto b = runtime::allocateBuffer(Device::cpu(), bytes);
  std::memcpy(b->hostData(), data, bytes);
  return b;
}

/// A graph whose one node is a fusion with body `build(body)` over inputs of `types`.
std::unique_ptr<ir::Graph> fusionGraph(const std::vector<ir::TensorType>& types,
                                       const std::function<ir::Value*(ir::Graph&)>& build) {
  auto g = std::make_unique<ir::Graph>("test");
  auto body = std::make_unique<ir::Graph>("fused");
  std::vector<ir::Value*> inputs;
  for (const ir::TensorType& t : types) {
    inputs.push_back(g->addInput(t));
    body->addInput(t);
  }
  ir::Value* out = build(*body);
  body->setOutputs({out});
  ir::Node* fusion = g->appendRaw(Op::fusion, inputs, {out->type()});
  fusion->setBody(std::move(body));
  g->setOutputs({fusion->output()});
  return g;
}

TEST(DropoutKernel, ABroadcastDropoutInsideALargerDomainIndexesItsOwnResult) {
  // add(x[R,C], dropout(b[C])): dropout's element c repeats down the rows.
  const int64_t rows = 37, cols = 129;
  auto g = fusionGraph({f32({rows, cols}), f32({cols}), kI64, kI64}, [](ir::Graph& body) {
    ir::Value* d = dropout(body, body.input(1), body.input(2), body.input(3), 0.4);
    return testutil::bin(body, Op::add, body.input(0), d);
  });
  const LoweredKernel lowered = lowerFusion(*g->nodes().at(0));
  ASSERT_EQ(lowered.kernel.numIndexSpaces(), 1);
  EXPECT_EQ(lowered.kernel.indexSpaces[0], InnerStride::one);
  // sizes {R, C}; strides x {C, 1}, b {0, 1}, seed, offset {0, 0}, out {C, 1}; index {0, 1}.
  EXPECT_EQ(lowered.launch.args, (std::vector<int64_t>{rows, cols, cols, 1, 0, 1, 0, 0, 0, 0, cols, 1, 0, 1}));

  std::vector<float> x(static_cast<size_t>(rows * cols)), b(static_cast<size_t>(cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) - 6.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.25f * static_cast<float>(i);
  const int64_t seed = 0x1234567890abcdefll, offset = 0x200000001ll;
  const runtime::Executable exe = compileGraph(*g, Device::cpu());
  auto outs = exe.run(
      {bufferOf(x.data(), x.size() * 4), bufferOf(b.data(), b.size() * 4), bufferOf(&seed, 8), bufferOf(&offset, 8)});
  const float* out = static_cast<const float*>(outs.at(0)->hostData());
  const float scale = static_cast<float>(1.0 / 0.6);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float d = keeps(seed, offset, static_cast<uint64_t>(c), 0.4) ? b[c] * scale : 0.0f;
      ASSERT_EQ(out[r * cols + c], x[r * cols + c] + d) << r << "," << c;
    }
}

TEST(DropoutKernel, ATransposedOperandDoesNotMoveTheIndex) {
  // dropout(x) where x is read transposed (strides {1, R} over [R,C]): the
  // operand's inner stride is `any`, the index space stays row-major.
  const int64_t rows = 50, cols = 70;
  auto g = fusionGraph({f32({rows, cols}), kI64, kI64},
                       [](ir::Graph& body) { return dropout(body, body.input(0), body.input(1), body.input(2), 0.5); });
  const std::vector<ir::Strides> strides = {{1, rows}, {}, {}};
  const std::vector<ir::Layout> layouts = {{{1, rows}, 0}, {{}, 0}, {{}, 0}};
  const LoweredKernel lowered = lowerFusion(*g->nodes().at(0), layouts);
  EXPECT_EQ(lowered.kernel.rank, 2);
  EXPECT_EQ(lowered.kernel.params[0].inner, InnerStride::any);
  EXPECT_EQ(lowered.kernel.indexSpaces, (std::vector<InnerStride>{InnerStride::one}));

  std::vector<float> storage(static_cast<size_t>(rows * cols));  // x[r][c] at c * rows + r
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = 1.0f + static_cast<float>(i);
  const int64_t seed = 7, offset = 3;
  const runtime::Executable exe = compileGraph(*g, Device::cpu(), strides);
  auto outs = exe.run({bufferOf(storage.data(), storage.size() * 4), bufferOf(&seed, 8), bufferOf(&offset, 8)});
  const float* out = static_cast<const float*>(outs.at(0)->hostData());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint64_t i = static_cast<uint64_t>(r * cols + c);
      ASSERT_EQ(out[i], keeps(7, 3, i, 0.5) ? storage[c * rows + r] * 2.0f : 0.0f) << r << "," << c;
    }
}

TEST(DropoutKernel, DropoutsOfOneShapeShareOneIndexAndCoalesceToRankOne) {
  auto g = fusionGraph({f32({8, 16, 4}), kI64, kI64, kI64}, [](ir::Graph& body) {
    ir::Value* a = dropout(body, body.input(0), body.input(1), body.input(2), 0.5);
    return dropout(body, a, body.input(1), body.input(3), 0.25);
  });
  const Kernel k = lowerFusion(*g->nodes().at(0)).kernel;
  EXPECT_EQ(k.rank, 1);
  EXPECT_EQ(k.numIndexSpaces(), 1);
  int indices = 0;
  for (const ScalarInstr& in : k.body) indices += in.kind == ScalarInstr::Kind::index;
  EXPECT_EQ(indices, 1) << k.str();
}

TEST(DropoutKernel, CheckKernelWantsAnIndexOperandExactlyWhereAnOpReadsOne) {
  using namespace instr;
  Kernel k;
  k.name = "kiln_test_dropout";
  k.params = {{DType::f32, false, InnerStride::one},
              {DType::i64, false, InnerStride::zero},
              {DType::i64, false, InnerStride::zero},
              {DType::f32, true, InnerStride::one}};
  k.indexSpaces = {InnerStride::one};
  const ir::Attributes p{{"p", 0.5}};
  k.body = {load(0), load(1, DType::i64), load(2, DType::i64), index(0), op(Op::dropout, {0, 1, 2, 3}, p), store(3, 4)};
  EXPECT_NO_THROW(checkKernel(k));
  Kernel noIndex = k;
  noIndex.body[4] = op(Op::dropout, {0, 1, 2, 2}, p);  // an i64 value, not an index
  EXPECT_THROW(checkKernel(noIndex), InternalError);
  Kernel short3 = k;
  short3.body[4] = op(Op::dropout, {0, 1, 2}, p);
  EXPECT_THROW(checkKernel(short3), InternalError);
  Kernel indexAsValue = k;
  indexAsValue.body[4] = op(Op::add, {1, 3}, {}, DType::i64);
  indexAsValue.body[5] = store(3, 0);
  EXPECT_THROW(checkKernel(indexAsValue), InternalError);
  Kernel badSpace = k;
  badSpace.body[3] = index(1);
  EXPECT_THROW(checkKernel(badSpace), InternalError);
  Kernel reduction = k;
  reduction.rank = 2;
  reduction.reduceRank = 1;
  reduction.body.push_back(reduce(ReduceOp::sum, 4));
  // Reduction kernels take index spaces too (dropout in a fused layer
  // norm's prologue): the index is a row value.
  EXPECT_NO_THROW(checkKernel(reduction));
  EXPECT_TRUE(kernelStages(reduction).row[3]);
  // The index space is part of the signature.
  Kernel other = k;
  other.indexSpaces = {InnerStride::any};
  EXPECT_NE(k.signature(), other.signature());
}

TEST(DropoutKernel, DrawsByGroupsGiveTheReferenceForEverySplitAndStrip) {
  // The CPU renderer draws a run's Philox blocks by groups of four before
  // the elements (Note [Draws by groups of four]), in strips of 1024
  // elements: rows of 2503 elements start at every index mod 4 and cross
  // strips, and the splits of [begin, end) start and end mid-group, mid-strip
  // and mid-row. Every element must be the reference's.
  using namespace instr;
  const int64_t rows = 3, cols = 2503;
  Kernel k;
  k.name = "grouped_dropout";
  k.rank = 2;
  k.params = {{DType::f32, false, InnerStride::one},
              {DType::i64, false, InnerStride::zero},
              {DType::i64, false, InnerStride::zero},
              {DType::f32, true, InnerStride::one}};
  k.indexSpaces = {InnerStride::one};
  k.body = {load(0),    load(1, DType::i64), load(2, DType::i64), index(0), op(Op::dropout, {0, 1, 2, 3}, {{"p", 0.3}}),
            store(3, 4)};
  ASSERT_NE(renderLlvmIr(k).find(".draw"), std::string::npos) << "the kernel draws by groups";
  const CompiledCpuKernel compiled = compileCpuKernel(k);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i % 101);
  const int64_t seed = 0x0123456789abcdefll, offset = 0x300000005ll;
  // sizes; strides of x, seed, offset, out; the index space's.
  const std::vector<int64_t> args = {rows, cols, cols, 1, 0, 0, 0, 0, cols, 1, cols, 1};
  const float scale = static_cast<float>(1.0 / 0.7);
  for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{
           {rows * cols}, {1, 2, 3, 1025, 2049, 2503, 2506, 5000, rows * cols}, {7, 4099, 4101, rows * cols}}) {
    std::vector<float> out(x.size(), -1.0f);
    void* buffers[] = {x.data(), const_cast<int64_t*>(&seed), const_cast<int64_t*>(&offset), out.data()};
    int64_t begin = 0;
    for (int64_t cut : cuts) {
      compiled.fn(buffers, args.data(), begin, cut);
      begin = cut;
    }
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(out[i], keeps(seed, offset, i, 0.3) ? x[i] * scale : 0.0f)
          << "element " << i << ", cuts at " << cuts[0];
  }
}

TEST(DropoutKernel, AFusedLayerNormDrawsByGroupsFromRowsStartingAnywhereInAGroup) {
  // relu -> dropout -> layer_norm compiled is one reduction kernel that
  // draws each row's groups before the row (Note [Draws by groups of
  // four]); with rows of a length that is not a multiple of 4, rows start
  // at every index mod 4 and end mid-group. Compiled must equal eager (whose
  // one-op dropout kernel tests/unit/frontend/dropout_test.cpp checks
  // against the reference) bit for bit, on every call.
  for (int64_t cols : {5, 67, 1001, 1026}) {
    Generator data(cols);
    const Tensor x = randn({33, cols}, data), w = randn({cols}, data), b = randn({cols}, data);
    Generator eagerGen(77), compiledGen(77);
    auto model = [cols](const Tensor& x, const Tensor& w, const Tensor& b, Generator& gen) {
      return layerNorm(dropout(relu(x), 0.3, true, gen), {cols}, w, b);
    };
    auto f = compile([&](const Tensor& x, const Tensor& w, const Tensor& b) { return model(x, w, b, compiledGen); });
    for (int call = 0; call < 2; ++call) {
      const std::vector<float> eager = model(x, w, b, eagerGen).toVector(), compiled = f(x, w, b).toVector();
      ASSERT_EQ(eager.size(), compiled.size());
      for (size_t i = 0; i < eager.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(eager[i]), std::bit_cast<uint32_t>(compiled[i]))
            << "rows of " << cols << ", call " << call << ", element " << i;
    }
    EXPECT_EQ(f.lastNumKernels(), 1) << f.lastGraph();
  }
}

TEST(DropoutKernel, AStridedIndexSpaceDrawsPerElement) {
  // An index space walked with a run-time stride cannot draw a run's groups
  // ahead: no draw loop, the formula per element (same bits).
  using namespace instr;
  Kernel k;
  k.name = "strided_dropout";
  k.rank = 1;
  k.params = {{DType::f32, false, InnerStride::one},
              {DType::i64, false, InnerStride::zero},
              {DType::i64, false, InnerStride::zero},
              {DType::f32, true, InnerStride::one}};
  k.indexSpaces = {InnerStride::any};
  k.body = {load(0),    load(1, DType::i64), load(2, DType::i64), index(0), op(Op::dropout, {0, 1, 2, 3}, {{"p", 0.3}}),
            store(3, 4)};
  EXPECT_EQ(renderLlvmIr(k).find(".draw"), std::string::npos);
  Kernel seedPerElement = k;
  seedPerElement.indexSpaces = {InnerStride::one};
  seedPerElement.params[1].inner = InnerStride::one;
  EXPECT_EQ(renderLlvmIr(seedPerElement).find(".draw"), std::string::npos);
}

}  // namespace
}  // namespace kiln::codegen
