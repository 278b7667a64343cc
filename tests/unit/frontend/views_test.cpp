// Eager views and copies: shared storage (a write through one view is seen
// by the others), the sizes, strides and offset of every view op, reshape
// as a view or a copy, toVector/data on strided tensors, elementwise ops
// reading transposed, sliced and expanded views in one kernel (no hidden
// copy), the eager cache keyed on strides, cat and stack, and the exact
// error of every kind of bad argument.
#include <gtest/gtest.h>

#include <numeric>

#include "common/error_of.h"
#include "frontend/kiln.h"
#include "runtime/executable.h"

namespace {

using namespace kiln;

/// 0, 1, ..., n-1 in `shape`, f32.
Tensor iota(const Shape& shape) { return arange(0, static_cast<double>(ir::numel(shape))).view(shape); }

/// The elements of x in row-major order, read one at a time through its
/// sizes and strides (an independent reference for toVector's gather).
std::vector<float> readByStrides(const Tensor& x) {
  std::vector<float> out;
  std::vector<int64_t> index(x.dim(), 0);
  // The base pointer of the storage: a contiguous view of it starting at 0.
  const float* base = static_cast<const float*>(x.impl()->storage->hostData());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t at = x.storageOffset();
    for (int d = 0; d < x.dim(); ++d) at += index[d] * x.strides()[d];
    out.push_back(base[at]);
    for (int d = x.dim() - 1; d >= 0; --d) {
      if (++index[d] < x.size(d)) break;
      index[d] = 0;
    }
  }
  return out;
}

TEST(Views, FactoriesAreContiguous) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_EQ(x.strides(), (ir::Strides{12, 4, 1}));
  EXPECT_EQ(x.storageOffset(), 0);
  EXPECT_TRUE(x.isContiguous());
  EXPECT_EQ(relu(x).strides(), (ir::Strides{12, 4, 1}));
  EXPECT_EQ(zeros({}).strides(), ir::Strides{});
}

TEST(Views, AWriteThroughOneViewIsSeenByTheOthers) {
  Tensor x = iota({4, 6});
  Tensor row = x.select(0, 1);  // contiguous, offset 6
  Tensor xt = x.t();
  ASSERT_TRUE(row.isContiguous());
  row.data<float>()[2] = 100;  // element [1, 2] of x
  EXPECT_EQ(x.toVector()[8], 100);
  EXPECT_EQ(xt.toVector()[2 * 4 + 1], 100) << "[2, 1] of the transpose";
  EXPECT_EQ(x.narrow(1, 2, 1).toVector()[1], 100);
  EXPECT_EQ(x.impl()->storage, xt.impl()->storage);
  EXPECT_EQ(x.impl()->storage, row.impl()->storage);
}

TEST(Views, StridesAndOffsetsOfEachOp) {
  Tensor x = iota({4, 6});
  struct Case {
    const char* what;
    Tensor t;
    Shape shape;
    ir::Strides strides;
    int64_t offset;
  };
  const Case cases[] = {
      {"view", x.view({2, 12}), {2, 12}, {12, 1}, 0},
      {"view -1", x.view({3, -1}), {3, 8}, {8, 1}, 0},
      {"transpose", x.transpose(0, 1), {6, 4}, {1, 6}, 0},
      {"t", x.t(), {6, 4}, {1, 6}, 0},
      {"permute", iota({2, 3, 4}).permute({2, 0, 1}), {4, 2, 3}, {1, 12, 4}, 0},
      {"permute negative", iota({2, 3, 4}).permute({-1, -3, -2}), {4, 2, 3}, {1, 12, 4}, 0},
      {"slice", x.slice(1, 1, 5, 2), {4, 2}, {6, 2}, 1},
      {"slice clamps", x.slice(0, -3, 100), {3, 6}, {6, 1}, 6},
      {"slice empty", x.slice(1, 4, 2), {4, 0}, {6, 1}, 4},
      {"narrow", x.narrow(-1, 2, 3), {4, 3}, {6, 1}, 2},
      {"narrow negative start", x.narrow(0, -2, 2), {2, 6}, {6, 1}, 12},
      {"select", x.select(1, 3), {4}, {6}, 3},
      {"select negative", x.select(0, -1), {6}, {1}, 18},
      {"expand", x.select(1, 0).unsqueeze(1).expand({4, 5}), {4, 5}, {6, 0}, 0},
      {"expand new dims", x.expand({2, 4, 6}), {2, 4, 6}, {0, 6, 1}, 0},
      {"expand -1", iota({1, 6}).expand({3, -1}), {3, 6}, {0, 1}, 0},
      {"unsqueeze", x.unsqueeze(1), {4, 1, 6}, {6, 6, 1}, 0},
      {"unsqueeze end", x.unsqueeze(-1), {4, 6, 1}, {6, 1, 1}, 0},
      {"squeeze", iota({1, 4, 1, 6}).squeeze(), {4, 6}, {6, 1}, 0},
      {"squeeze dim", iota({4, 1, 6}).squeeze(1), {4, 6}, {6, 1}, 0},
      {"squeeze dim not 1", x.squeeze(0), {4, 6}, {6, 1}, 0},
      {"flatten", iota({2, 3, 4}).flatten(1), {2, 12}, {12, 1}, 0},
      {"flatten all", iota({2, 3, 4}).flatten(), {24}, {1}, 0},
      {"flatten of a transpose's outer dims", iota({2, 3, 4}).permute({2, 0, 1}).flatten(1), {4, 6}, {1, 4}, 0},
      {"view of a slice", x.slice(0, 1, 3).view({12}), {12}, {1}, 6},
      {"view splitting a transposed dim", x.t().view({2, 3, 4}), {2, 3, 4}, {3, 1, 6}, 0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.t.shape(), c.shape) << c.what;
    EXPECT_EQ(c.t.strides(), c.strides) << c.what;
    EXPECT_EQ(c.t.storageOffset(), c.offset) << c.what;
    EXPECT_EQ(c.t.toVector(), readByStrides(c.t)) << c.what;
  }
}

TEST(Views, ValuesFollowTorch) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(x.t().toVector(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(x.slice(1, 0, 4, 3).toVector(), (std::vector<float>{0, 3, 4, 7, 8, 11}));
  EXPECT_EQ(x.select(1, 2).toVector(), (std::vector<float>{2, 6, 10}));
  EXPECT_EQ(x.select(0, 1).unsqueeze(0).expand({2, 4}).toVector(), (std::vector<float>{4, 5, 6, 7, 4, 5, 6, 7}));
  EXPECT_EQ(x.t().reshape({12}).toVector(), x.t().toVector());
}

TEST(Views, ReshapeIsAViewWhenTheStridesAllowElseACopy) {
  Tensor x = iota({4, 6});
  Tensor v = x.reshape({6, 4});
  EXPECT_EQ(v.impl()->storage, x.impl()->storage) << "contiguous: a view";
  Tensor t = x.t();
  const int64_t before = runtime::kernelLaunchCount();
  Tensor c = t.reshape({24});
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 1) << "one copy kernel";
  EXPECT_NE(c.impl()->storage, x.impl()->storage);
  EXPECT_TRUE(c.isContiguous());
  EXPECT_EQ(c.toVector(), t.toVector());
  EXPECT_EQ(t.reshape({2, 3, 4}).impl()->storage, x.impl()->storage) << "splitting one dimension stays a view";
  EXPECT_NE(t.flatten().impl()->storage, x.impl()->storage) << "flattening a transpose copies";
  EXPECT_EQ(x.view({2, 12}).impl()->storage, x.impl()->storage);
}

TEST(Views, ContiguousAndClone) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(x.contiguous().impl(), x.impl()) << "a contiguous tensor is its own contiguous()";
  Tensor t = x.t();
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.isContiguous());
  EXPECT_EQ(c.strides(), (ir::Strides{3, 1}));
  EXPECT_EQ(c.toVector(), t.toVector());
  Tensor k = x.clone();
  EXPECT_NE(k.impl()->storage, x.impl()->storage);
  k.data<float>()[0] = 42;
  EXPECT_EQ(x.toVector()[0], 0) << "a clone shares nothing";
}

TEST(Views, DataRequiresContiguousAndToVectorGathers) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(errorOf([&] { x.t().data<float>(); }),
            "data: f32[3,2]@cpu with strides [1,3] is not contiguous (call contiguous() first, or read it with "
            "toVector())");
  EXPECT_EQ(x.select(0, 1).data<float>()[0], 3) << "a contiguous view starts at its offset";
  EXPECT_EQ(x.select(1, 2).select(0, 1).item<float>(), 5);
  Tensor i = fromVector(std::vector<int32_t>{1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(i.t().toVector<int32_t>(), (std::vector<int32_t>{1, 3, 2, 4}));
  Tensor b = fromVector(std::vector<bool>{true, false, false, true, true, false}, {2, 3});
  EXPECT_EQ(b.t().toVector<bool>(), (std::vector<bool>{true, true, false, true, false, false}));
}

/// y = f(view) must equal f(view.contiguous()) bit for bit and take one kernel.
void expectOneKernelLikeContiguous(const char* what, const Tensor& view,
                                   const std::function<Tensor(const Tensor&)>& f) {
  const Tensor copy = view.contiguous();
  const Tensor want = f(copy);
  const int64_t before = runtime::kernelLaunchCount();
  const Tensor got = f(view);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 1) << what << ": one kernel, no hidden copy";
  EXPECT_TRUE(got.isContiguous()) << what;
  EXPECT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.toVector(), want.toVector()) << what;
}

TEST(Views, ElementwiseOpsReadViewsInOneKernel) {
  Tensor x = randn({16, 24});
  Tensor b = randn({24});
  Tensor y = randn({16, 24});
  auto unary = [](const Tensor& v) { return kiln::sigmoid(v); };
  expectOneKernelLikeContiguous("transpose", x.t(), unary);
  expectOneKernelLikeContiguous("slice with a step", x.slice(1, 3, 20, 3), unary);
  expectOneKernelLikeContiguous("narrow (offset)", x.narrow(0, 5, 7), unary);
  expectOneKernelLikeContiguous("select", x.select(1, 5), unary);
  expectOneKernelLikeContiguous("expand", b.unsqueeze(0).expand({5, 24}), unary);
  expectOneKernelLikeContiguous("permute 3-d", x.view({4, 4, 24}).permute({2, 0, 1}), unary);
  expectOneKernelLikeContiguous("binary with a transposed operand", x.t(),
                                [&](const Tensor& v) { return maximum(v, y.t()); });
  expectOneKernelLikeContiguous("broadcast against a view", x.slice(0, 2, 10),
                                [&](const Tensor& v) { return v + b.slice(0, 0, 24); });
  // Two views of one buffer in one op: each is its own kernel parameter.
  Tensor sq = randn({8, 8});
  const int64_t before = runtime::kernelLaunchCount();
  Tensor sym = sq + sq.t();
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 1);
  EXPECT_EQ(sym.toVector(), (sq + sq.t().contiguous()).toVector());
}

TEST(Views, KernelsReadViewsOfEveryElementSize) {
  // Offsets are in elements: each dtype's view must start at its own element.
  Tensor i = fromVector(std::vector<int64_t>{0, 1, 2, 3, 4, 5}, {2, 3});
  EXPECT_EQ((i.t().narrow(0, 1, 2) * 10).toVector<int64_t>(), (std::vector<int64_t>{10, 40, 20, 50}));
  Tensor h = fromVector(std::vector<Half>{Half(0.5f), Half(1.5f), Half(2.5f), Half(3.5f)}, {2, 2});
  EXPECT_EQ(h.select(1, 1).to(DType::f32).toVector(), (std::vector<float>{1.5f, 3.5f}));
  Tensor b = fromVector(std::vector<bool>{true, false, true, true, false, false}, {3, 2});
  Tensor w = where(b.t().slice(1, 1, 3), 1.0, 0.0);
  EXPECT_EQ(w.toVector(), (std::vector<float>{1, 0, 1, 0}));
  EXPECT_EQ((i.select(0, 1) > i.select(0, 0) + 2).toVector<bool>(), (std::vector<bool>{true, true, true}));
}

TEST(Views, TheEagerCacheKeysOnStridesNotOffsets) {
  Tensor a = randn({6, 6});
  Tensor r1 = relu(a);
  Tensor r2 = relu(a.t());  // same type, other strides: must not reuse a's executable
  EXPECT_EQ(r2.toVector(), relu(a.t().contiguous()).toVector());
  EXPECT_NE(r1.toVector(), r2.toVector());
  (void)(a.select(0, 1) + 1.0);
  const auto built = detail::eagerStats().graphsBuilt;
  Tensor s = a.select(0, 4) + 1.0;  // same strides, another offset: the same executable
  EXPECT_EQ(detail::eagerStats().graphsBuilt, built);
  EXPECT_EQ(s.toVector(), (a.select(0, 4).contiguous() + 1.0).toVector());
}

TEST(Views, CatAndStack) {
  Tensor a = iota({2, 3});
  Tensor b = iota({2, 2}) + 100.0;
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(c.shape(), (Shape{2, 5}));
  EXPECT_EQ(c.toVector(), (std::vector<float>{0, 1, 2, 100, 101, 3, 4, 5, 102, 103}));
  EXPECT_EQ(cat({a, a.slice(0, 1, 2)}, 0).toVector(), (std::vector<float>{0, 1, 2, 3, 4, 5, 3, 4, 5}));
  // Views are read through: one kernel per input.
  const int64_t before = runtime::kernelLaunchCount();
  Tensor ct = cat({a.t(), (a + 100.0).t(), a.t()}, -1);
  EXPECT_EQ(runtime::kernelLaunchCount() - before, 4) << "the add, then one copy per input";
  EXPECT_EQ(ct.shape(), (Shape{3, 6}));
  EXPECT_EQ(ct.toVector(), (std::vector<float>{0, 3, 100, 103, 0, 3, 1, 4, 101, 104, 1, 4, 2, 5, 102, 105, 2, 5}));
  // Promotion, as torch.cat.
  Tensor mixed = cat({fromVector(std::vector<int32_t>{1, 2}), fromVector({0.5f})});
  EXPECT_EQ(mixed.dtype(), DType::f32);
  EXPECT_EQ(mixed.toVector(), (std::vector<float>{1, 2, 0.5}));
  // stack: a new dimension.
  Tensor s0 = stack({a, a * 2.0}, 0);
  EXPECT_EQ(s0.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(s0.toVector(), (std::vector<float>{0, 1, 2, 3, 4, 5, 0, 2, 4, 6, 8, 10}));
  Tensor s2 = stack({a, a * 2.0}, -1);
  EXPECT_EQ(s2.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(s2.toVector(), (std::vector<float>{0, 0, 1, 2, 2, 4, 3, 6, 4, 8, 5, 10}));
  const int64_t beforeStack = runtime::kernelLaunchCount();
  stack({a, a, a}, 1);
  EXPECT_EQ(runtime::kernelLaunchCount() - beforeStack, 3) << "one copy per input";
  EXPECT_EQ(cat({a, b.slice(1, 0, 0)}, 1).toVector(), a.toVector()) << "an empty input adds nothing";
}

TEST(Views, ErrorsNameTheOpTheArgumentsAndTheTensor) {
  Tensor x = iota({4, 6});
  Tensor s = zeros({});
  // clang-format off
  const std::pair<std::function<void()>, std::string> cases[] = {
      {[&] { x.t().view({24}); }, "view: cannot view f32[6,4]@cpu with strides [1,6] as [24]: use reshape"},
      {[&] { x.view({5, 5}); }, "view: shape [5,5] is invalid for f32[4,6]@cpu (24 elements)"},
      {[&] { x.reshape({5, -1}); }, "reshape: shape [5,-1] is invalid for f32[4,6]@cpu (24 elements)"},
      {[&] { x.view({-1, -1}); }, "view: only one dimension can be inferred, got [-1,-1] for f32[4,6]@cpu"},
      {[&] { x.view({-2, 12}); }, "view: invalid size -2 in [-2,12] for f32[4,6]@cpu"},
      {[&] { zeros({0, 4}).reshape({-1, 0}); },
       "reshape: cannot infer the size of -1 in [-1,0] for f32[0,4]@cpu: it could be any value"},
      {[&] { x.permute({0, 0}); }, "permute: dims [0,0] are not a permutation of the 2 dimensions of f32[4,6]@cpu"},
      {[&] { x.permute({0}); }, "permute: dims [0] are not a permutation of the 2 dimensions of f32[4,6]@cpu"},
      {[&] { x.transpose(0, 2); }, "transpose: dimension 2 out of range for f32[4,6]@cpu (expected -2 to 1)"},
      {[&] { iota({2, 3, 4}).t(); }, "t: expected a tensor with at most 2 dimensions, got f32[2,3,4]@cpu"},
      {[&] { x.slice(1, 0, 4, 0); }, "slice: step must be positive, got 0 for f32[4,6]@cpu"},
      {[&] { x.slice(-3, 0, 1); }, "slice: dimension -3 out of range for f32[4,6]@cpu (expected -2 to 1)"},
      {[&] { s.slice(0, 0, 1); }, "slice: cannot slice a 0-d tensor f32[]@cpu"},
      {[&] { x.narrow(1, 4, 3); }, "narrow: start 4 and length 3 exceed size 6 of dimension 1 of f32[4,6]@cpu"},
      {[&] { x.narrow(1, 7, 0); }, "narrow: start 7 out of range for dimension 1 of size 6 of f32[4,6]@cpu"},
      {[&] { x.narrow(0, 0, -1); }, "narrow: length must be non-negative, got -1 for f32[4,6]@cpu"},
      {[&] { x.select(0, 4); }, "select: index 4 out of range for dimension 0 of size 4 of f32[4,6]@cpu"},
      {[&] { x.select(1, -7); }, "select: index -7 out of range for dimension 1 of size 6 of f32[4,6]@cpu"},
      {[&] { s.select(0, 0); }, "select: cannot select from a 0-d tensor f32[]@cpu"},
      {[&] { x.expand({4, 5}); }, "expand: cannot expand f32[4,6]@cpu to [4,5]: size 6 of dimension 1 is not 1 or 5"},
      {[&] { x.expand({6}); },
       "expand: cannot expand f32[4,6]@cpu to [6]: the target has fewer dimensions (1) than the tensor (2)"},
      {[&] { x.expand({-1, 4, 6}); },
       "expand: size -1 is not allowed for the new leading dimension 0 of [-1,4,6] (expanding f32[4,6]@cpu)"},
      {[&] { x.squeeze(2); }, "squeeze: dimension 2 out of range for f32[4,6]@cpu (expected -2 to 1)"},
      {[&] { x.unsqueeze(3); }, "unsqueeze: dimension 3 out of range for f32[4,6]@cpu (expected -3 to 2)"},
      {[&] { x.flatten(1, 0); }, "flatten: start dimension 1 is after end dimension 0 for f32[4,6]@cpu"},
      {[&] { Tensor().view({1}); }, "view: use of an undefined tensor"},
      {[&] { cat({}); }, "cat: expected a non-empty list of tensors"},
      {[&] { cat({x, Tensor()}); }, "cat: argument 1 is an undefined tensor"},
      {[&] { cat({s, s}); }, "cat: zero-dimensional tensor f32[]@cpu cannot be concatenated"},
      {[&] { cat({x, x}, 2); }, "cat: dimension 2 out of range for f32[4,6]@cpu (expected -2 to 1)"},
      {[&] { cat({x, zeros({6})}); }, "cat: expected tensors of the same rank, got f32[4,6]@cpu and f32[6]@cpu"},
      {[&] { cat({x, zeros({3, 5})}, 0); },
       "cat: expected equal sizes outside dimension 0, got f32[4,6]@cpu and f32[3,5]@cpu"},
      {[&] { stack({}); }, "stack: expected a non-empty list of tensors"},
      {[&] { stack({x, x.t()}); }, "stack: expected all tensors to have the same shape, got f32[4,6]@cpu and f32[6,4]@cpu"},
      {[&] { stack({x, x}, 3); }, "stack: dimension 3 out of range for f32[4,6]@cpu (expected -3 to 2)"},
  };
  // clang-format on
  for (const auto& [fn, want] : cases) EXPECT_EQ(errorOf(fn), want);
}

TEST(Views, ZeroDimAndEmptyTensors) {
  Tensor s = full({}, 3.0);
  EXPECT_EQ(s.t().item<float>(), 3);
  EXPECT_EQ(s.unsqueeze(0).shape(), (Shape{1}));
  EXPECT_EQ(s.flatten().shape(), (Shape{1}));
  EXPECT_EQ(s.view({1, 1}).strides(), (ir::Strides{1, 1}));
  EXPECT_EQ(s.squeeze(0).shape(), Shape{});
  EXPECT_EQ(s.expand({2, 3}).toVector(), (std::vector<float>(6, 3.0f)));
  Tensor e = zeros({3, 0});
  EXPECT_TRUE(e.t().isContiguous()) << "an empty tensor is contiguous";
  EXPECT_EQ(relu(e.t()).shape(), (Shape{0, 3}));
  EXPECT_EQ(e.reshape({0, 5}).shape(), (Shape{0, 5}));
}

}  // namespace
