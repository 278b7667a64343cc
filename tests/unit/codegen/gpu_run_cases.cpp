// The run cases of gpu_kernel_cases.h and the harness that runs them on a
// device against the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "codegen/cpu_compiler.h"
#include "ir/scalar_eval.h"
#include "unit/codegen/gpu_kernel_cases.h"

namespace kiln::codegen::testing {

namespace {

using namespace instr;
using ir::Op;

/// Elements of `d` drawn from [-4, 4) (integers, bool: their range),
/// small enough that sums neither overflow nor cancel badly.
Buffer smallElements(DType d, size_t n, uint32_t seed) {
  Buffer b(n * static_cast<size_t>(itemSize(d)));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-4, 4);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = b.data() + i * static_cast<size_t>(itemSize(d));
    if (isFloatingPoint(d))
      storeAs(p, d, u(rng));
    else
      storeIntAs(p, d, d == DType::boolean ? static_cast<int64_t>(rng() & 1) : static_cast<int64_t>(u(rng) * 4));
  }
  return b;
}

/// A case over `sizes` whose parameter p has strides[p] and starts
/// offsets[p] elements into its own buffer, sized for what the strides
/// reach; index spaces follow the params in `strides`. Inputs hold `fill`,
/// outputs a pattern.
RunCase strided(const Kernel& k, const std::vector<int64_t>& sizes, const std::vector<std::vector<int64_t>>& strides,
                std::vector<int64_t> offsets, const std::function<Buffer(DType, size_t, uint32_t)>& fill) {
  RunCase c;
  c.label = k.name;
  c.kernel = k;
  c.launch.args = sizes;
  for (const std::vector<int64_t>& s : strides) c.launch.args.insert(c.launch.args.end(), s.begin(), s.end());
  c.launch.numel = 1;
  for (int d = 0; d < k.rank - k.reduceRank; ++d) c.launch.numel *= sizes[static_cast<size_t>(d)];
  if (offsets.empty()) offsets.assign(k.params.size(), 0);
  c.offsets = offsets;
  for (int p = 0; p < k.numParams(); ++p) {
    int64_t last = 0;
    for (int d = 0; d < k.rank; ++d) last += (sizes[static_cast<size_t>(d)] - 1) * strides[static_cast<size_t>(p)][d];
    const size_t n = static_cast<size_t>(offsets[static_cast<size_t>(p)] + last + 1);
    const DType t = k.params[p].dtype;
    c.buffers.push_back(k.params[p].output ? Buffer(n * static_cast<size_t>(itemSize(t)), 0xcd)
                                           : fill(t, n, static_cast<uint32_t>(p + 1)));
    c.bufferOf.push_back(p);
  }
  return c;
}

/// A contiguous rank-1 case of n elements; scalar (inner stride zero) params get one element.
RunCase flat(const Kernel& k, int64_t n, std::vector<int64_t> offsets = {}) {
  std::vector<std::vector<int64_t>> strides;
  for (const KernelParam& p : k.params) strides.push_back({p.inner == InnerStride::zero ? 0 : 1});
  for (size_t s = 0; s < k.indexSpaces.size(); ++s) strides.push_back({1});
  return strided(k, {n}, strides, std::move(offsets), testElements);
}

/// Seed and offset of the dropout cases: 0-d i64 values.
void setDraw(RunCase& c) {
  storeIntAs(c.buffers[1].data(), DType::i64, 0x123456789abcll);
  storeIntAs(c.buffers[2].data(), DType::i64, 5);
}

/// The every-op-on-`d` kernels: each op of allOpCases whose first operand
/// is `d` but casts (a sample of them for f16 and bf16 unless `coverage` is
/// full), at most `perKernel` outputs per kernel (kernel arguments are
/// limited to 1 KiB on PoCL), over x, y of `d` and a bool c. y is read
/// transposed, so they run the scalar loop: the body once, not five times
/// (four vector lanes and the tail), which PoCL compiles five times faster.
std::vector<Kernel> opsOn(DType d, size_t perKernel, Coverage coverage) {
  const bool sample = coverage == Coverage::sampled && (d == DType::f16 || d == DType::bf16);
  const std::set<Op> sampled = {Op::add, Op::mul, Op::div, Op::exp, Op::tanh, Op::maximum, Op::gt, Op::where};
  std::vector<OpCase> cases;
  for (const OpCase& c : allOpCases())
    if (c.op != Op::cast && (c.op == Op::where ? c.in[1] : c.in[0]) == d && (!sample || sampled.count(c.op)))
      cases.push_back(c);
  std::vector<Kernel> ks;
  for (size_t first = 0; first < cases.size(); first += perKernel) {
    Kernel k;
    k.name = fmt::format("kiln_ops_{}_{}", dtypeName(d), first / perKernel);
    k.rank = 2;
    k.params = {{d, false, InnerStride::one}, {d, false, InnerStride::any}, {DType::boolean, false, InnerStride::one}};
    k.body = {load(0, d), load(1, d), load(2, DType::boolean)};
    for (size_t i = first; i < std::min(cases.size(), first + perKernel); ++i) {
      const OpCase& c = cases[i];
      std::vector<int> operands;
      for (size_t o = 0; o < c.in.size(); ++o) operands.push_back(static_cast<int>(o));
      if (c.op == Op::where) operands = {2, 0, 1};  // where(c, x, y)
      k.params.push_back({c.out, true, InnerStride::one});
      k.body.push_back(op(c.op, operands, c.attrs, c.out));
      k.body.push_back(store(k.numParams() - 1, static_cast<int>(k.body.size()) - 1, c.out));
    }
    ks.push_back(std::move(k));
  }
  return ks;
}

/// x of `d` cast to every dtype, vectorized: 4-wide loads of every storage
/// type, 4-wide stores of every one.
Kernel castsFrom(DType d) {
  Kernel k;
  k.name = fmt::format("kiln_casts_{}", dtypeName(d));
  k.params = {{d, false, InnerStride::one}};
  k.body = {load(0, d)};
  for (DType to : kAllDTypes) {
    k.params.push_back({to, true, InnerStride::one});
    k.body.push_back(op(Op::cast, {0}, {{"dtype", to}}, to));
    k.body.push_back(store(k.numParams() - 1, static_cast<int>(k.body.size()) - 1, to));
  }
  return k;
}

/// Rows the reduction cases reduce: special values, rows of ties and rows
/// with two NaNs (argmax takes the first).
RunCase rows(const Kernel& k, int64_t numRows, int64_t length) {
  const DType d = k.params[0].dtype;
  std::vector<std::vector<int64_t>> strides(k.params.size(), {1, 0});  // outputs: one per row
  strides[0] = {length, 1};
  RunCase c = strided(k, {numRows, length}, strides, {}, testElements);
  const size_t size = static_cast<size_t>(itemSize(d));
  uint8_t* x = c.buffers[0].data();
  for (int64_t j = 0; j < length; ++j) std::memcpy(x + (length + j) * size, x + 5 * size, size);  // row 1: all 1.0
  if (isFloatingPoint(d)) {
    std::memcpy(x + (2 * length + 7) * size, x + 4 * size, size);  // row 2: NaN at 7 and 200
    std::memcpy(x + (2 * length + 200) * size, x + 4 * size, size);
  }
  return c;
}

/// Note [One reduction tree] on the host: the fold of `row` in the GPU's order.
template <class A>
A treeFold(const std::vector<A>& row) {
  std::vector<A> acc(kGpuLocalSize, A(0));
  for (size_t j = 0; j < row.size(); ++j) acc[j % kGpuLocalSize] = acc[j % kGpuLocalSize] + row[j];
  for (int o = 16; o > 0; o /= 2)
    for (int t = 0; t < kGpuLocalSize; ++t)
      if ((t & 31) < o) acc[t] = acc[t] + acc[t + o];
  const int groups = kGpuLocalSize / 32;
  for (int o = 16; o > 0; o /= 2)
    for (int t = 0; t < groups; ++t)
      if (t + o < groups) acc[t * 32] = acc[t * 32] + acc[(t + o) * 32];
  return acc[0];
}

/// Output `param` of case c, a float sum of input 0 over each row (in f64
/// after a cast when `inF64`, then cast to the output's dtype), folded in
/// the GPU's order.
void treeSum(const RunCase& c, std::vector<Buffer>& out, int param, bool inF64) {
  const DType in = c.kernel.params[0].dtype, outType = c.kernel.params[param].dtype;
  const int64_t length = c.launch.args[1];
  for (int64_t r = 0; r < c.launch.numel; ++r) {
    std::vector<double> row64;
    std::vector<float> row32;
    for (int64_t j = 0; j < length; ++j) {
      const double v = readElement(c.buffers[0], in, static_cast<size_t>(r * length + j)).f;
      row64.push_back(v);
      row32.push_back(static_cast<float>(v));
    }
    ir::ScalarValue sum;
    if (inF64) {
      const ir::ScalarValue s = ir::ScalarValue::of(DType::f64, treeFold(row64));
      sum = ir::evalScalar(Op::cast, {&s, 1}, {{"dtype", outType}});
    } else {
      sum = ir::ScalarValue::of(DType::f32, treeFold(row32));
    }
    writeElement(out[static_cast<size_t>(param)], static_cast<size_t>(r), sum);
  }
}

/// Runs kernel c on the CPU backend over `buffers`.
void cpuReference(const RunCase& c, std::vector<Buffer>& buffers) {
  const CompiledCpuKernel k = compileCpuKernel(c.kernel);
  std::vector<void*> pointers;
  for (int p = 0; p < c.kernel.numParams(); ++p)
    pointers.push_back(buffers[static_cast<size_t>(c.bufferOf[p])].data() +
                       c.offsets[p] * itemSize(c.kernel.params[p].dtype));
  k.fn(pointers.data(), c.launch.args.data(), 0, c.launch.numel);
}

/// Cases of the kernels traced programs lower to, over random small inputs.
void addLowered(std::vector<RunCase>& out) {
  std::set<std::string> seen;
  for (LoweredCase& l : loweredCases()) {
    if (!seen.insert(l.lowered.kernel.name).second) continue;
    RunCase c;
    c.label = l.program + ": " + l.lowered.kernel.name;
    c.kernel = l.lowered.kernel;
    c.launch = l.lowered.launch;
    uint32_t seed = 1;
    for (const ir::TensorType& t : l.inputs) {
      const size_t n = static_cast<size_t>(std::max<int64_t>(1, t.numel()));
      // i64 inputs are class indices (cross_entropy) or a draw's seed and offset.
      c.buffers.push_back(t.dtype == DType::i64 ? Buffer(n * 8) : smallElements(t.dtype, n, seed++));
      for (size_t i = 0; t.dtype == DType::i64 && i < n; ++i)
        storeIntAs(c.buffers.back().data() + 8 * i, t.dtype, i % 7);
    }
    for (const ir::TensorType& t : l.results)
      c.buffers.push_back(Buffer(static_cast<size_t>(std::max<int64_t>(1, t.numel()) * itemSize(t.dtype)), 0xcd));
    for (const ParamBinding& b : l.lowered.bindings) {
      c.bufferOf.push_back(b.output ? static_cast<int>(l.inputs.size()) + b.index : b.index);
      c.offsets.push_back(b.offset);
    }
    // Float sums are added in another order than the CPU's.
    bool f16 = false;
    for (const ir::TensorType& t : l.results) f16 = f16 || t.dtype == DType::f16;
    c.tolerance = c.kernel.isReduction() ? (f16 ? 2e-3 : 1e-4) : 0;
    out.push_back(std::move(c));
  }
}

bool closeEnough(const Buffer& want, const Buffer& got, DType d, size_t i, double tolerance) {
  if (sameElement(want, got, d, i)) return true;
  if (tolerance == 0 || !isFloatingPoint(d)) return false;
  const double a = readElement(want, d, i).f, b = readElement(got, d, i).f;
  return std::fabs(a - b) <= tolerance * std::max({std::fabs(a), std::fabs(b), 1.0});
}

}  // namespace

namespace {

std::vector<RunCase> opsCases(Coverage coverage) {
  std::vector<RunCase> cases;
  // Every op on every dtype, x and the first output at odd offsets, y
  // transposed; casts between every pair, vectorized.
  for (DType d : kAllDTypes) {
    for (const Kernel& k : opsOn(d, 16, coverage)) {
      std::vector<std::vector<int64_t>> strides(k.params.size(), {79, 1});
      strides[1] = {1, 19};
      std::vector<int64_t> offsets(k.params.size(), 0);
      offsets[0] = 3;
      offsets[3] = 1;
      cases.push_back(strided(k, {19, 79}, strides, offsets, testElements));
    }
    cases.push_back(flat(castsFrom(d), 1501, {3, 1, 0, 0, 0, 0, 0, 0}));
  }
  return cases;
}

std::vector<RunCase> elementwiseCases() {
  std::vector<RunCase> cases;
  for (const Kernel& k : elementwiseKernels()) {
    const std::string& n = k.name;
    if (n == "kiln_add_bias_1") cases.push_back(strided(k, {37, 53}, {{53, 1}, {0, 1}, {53, 1}}, {}, testElements));
    if (n == "kiln_add_bias_0") cases.push_back(strided(k, {37, 53}, {{1, 0}, {0, 1}, {53, 1}}, {}, testElements));
    if (n == "kiln_add_bias_n")
      cases.push_back(strided(k, {37, 53}, {{1, 37}, {0, 1}, {53, 1}}, {2, 0, 1}, testElements));
    if (n == "kiln_rank3")
      cases.push_back(strided(k, {5, 6, 7}, {{1, 5, 30}, {6, 1, 0}, {42, 7, 1}}, {}, testElements));
    if (n == "kiln_half_chain")
      cases.push_back(strided(k, {19, 41}, {{41, 1}, {1, 0}, {1, 19}, {41, 1}, {41, 1}, {41, 1}}, {}, testElements));
    if (n == "kiln_every_op" || n == "kiln_cmp_bool" || n == "kiln_int_constants")
      cases.push_back(flat(k, 1501, std::vector<int64_t>(k.params.size(), 1)));
    if (n.starts_with("kiln_dropout_")) {
      if (k.rank == 1)
        cases.push_back(flat(k, 1501));
      else if (k.params[0].inner == InnerStride::any)
        cases.push_back(strided(k, {23, 29}, {{1, 23}, {0, 0}, {0, 0}, {29, 1}, {29, 1}}, {}, smallElements));
      else
        cases.push_back(strided(k, {23, 29}, {{29, 1}, {0, 0}, {0, 0}, {29, 1}, {1, 23}}, {}, smallElements));
      setDraw(cases.back());
    }
    if (n.starts_with("kiln_rand_") || n.starts_with("kiln_randn_")) {
      cases.push_back(flat(k, 1501));
      storeIntAs(cases.back().buffers[0].data(), DType::i64, 0x123456789abcll);  // seed
      storeIntAs(cases.back().buffers[1].data(), DType::i64, 0x100000005ll);    // offset: its high word is 1
    }
  }
  return cases;
}

std::vector<RunCase> reductionCases() {
  std::vector<RunCase> cases;
  // Every reduction of each dtype in one kernel, the float sums against the
  // GPU's order; sums in their own dtype; two reduced dims with an outer
  // input. (Kernels of several passes are the lowered ones.)
  for (const Kernel& k : reductionKernels()) {
    const std::string& n = k.name;
    if (n.starts_with("kiln_rows_")) {
      cases.push_back(rows(k, 23, 300));
      if (isFloatingPoint(k.params[0].dtype))
        cases.back().reference = [](const RunCase& c, std::vector<Buffer>& out) {
          cpuReference(c, out);
          treeSum(c, out, c.kernel.numParams() - 1, true);
        };
    } else if (n == "kiln_sum_i32_i32") {
      cases.push_back(rows(k, 23, 300));
    } else if (n == "kiln_sum_f32_f32") {
      cases.push_back(rows(k, 23, 300));
      cases.back().reference = [](const RunCase& c, std::vector<Buffer>& out) { treeSum(c, out, 1, false); };
    } else if (n == "kiln_sum_bias") {
      cases.push_back(strided(k, {7, 11, 13}, {{143, 1, 11}, {1, 0, 0}, {1, 0, 0}}, {}, smallElements));
      cases.back().tolerance = 1e-6;
    }
  }
  return cases;
}

}  // namespace

std::vector<RunCase> runCases(CaseGroup group, Coverage coverage) {
  switch (group) {
    case CaseGroup::ops: return opsCases(coverage);
    case CaseGroup::elementwise: return elementwiseCases();
    case CaseGroup::reductions: return reductionCases();
    case CaseGroup::lowered: {
      std::vector<RunCase> cases;
      addLowered(cases);
      return cases;
    }
  }
  return {};
}

int runAndCompare(KernelDevice& device, const std::vector<RunCase>& cases) {
  std::vector<RenderedKernel> rendered;
  std::map<std::string, size_t> byName;
  for (const RunCase& c : cases)
    if (byName.emplace(c.kernel.name, rendered.size()).second)
      rendered.push_back(renderGpuKernel(c.kernel, device.dialect()));
  device.build(rendered);
  for (const RunCase& c : cases) {
    SCOPED_TRACE(c.label);
    std::vector<Buffer> want = c.buffers, got = c.buffers;
    if (c.reference)
      c.reference(c, want);
    else
      cpuReference(c, want);
    const RenderedKernel& r = rendered[byName.at(c.kernel.name)];
    // Few groups, so that every grid-stride loop takes several steps.
    device.run(r, c.kernel, got, c.bufferOf, c.offsets, c.launch, r.launch.groups(c.launch.numel, 3));
    for (int p = 0; p < c.kernel.numParams(); ++p) {
      if (!c.kernel.params[p].output) continue;
      const DType d = c.kernel.params[p].dtype;
      const Buffer& w = want[static_cast<size_t>(c.bufferOf[p])];
      const Buffer& g = got[static_cast<size_t>(c.bufferOf[p])];
      int mismatches = 0;
      for (size_t i = 0; i < w.size() / static_cast<size_t>(itemSize(d)); ++i)
        if (!closeEnough(w, g, d, i, c.tolerance) && ++mismatches <= 3)
          ADD_FAILURE() << device.name() << ": output p" << p << " at " << i << ": want " << elementStr(w, d, i)
                        << ", got " << elementStr(g, d, i);
      EXPECT_EQ(mismatches, 0) << c.label << " p" << p;
    }
  }
  return static_cast<int>(cases.size());
}

}  // namespace kiln::codegen::testing
