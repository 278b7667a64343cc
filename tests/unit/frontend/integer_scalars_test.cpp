// Integer scalars beyond 2^53 under kiln::compile (Note [Integer constants
// are exact] in ir/attributes.h): a traced scalar is a constant of the
// program, and an i64 one must keep all 64 bits, as eager code does, not
// pass through a double (`x == 2^60 + 2` matched 2^60 before). Compiled
// equals eager equals PyTorch for i64 eq, add, mul, where and maximum with
// 2^53 + 1, 2^60 + 2, INT64_MIN and INT64_MAX; i32 ops with the i32 limits;
// an f64 op with an integer scalar beyond 2^53 (rounded once to the double,
// as eagerly) and an f32 op with one (rounded once to f32, not through a
// double first).
//
// The expected values were made with PyTorch 2.15.0 (CPU):
//   x = torch.tensor([2**60, 2**60 + 2, 2**53, 2**53 + 1, -2**63, 2**63 - 1, -1, 0])
//   x == s, x + s, x * s, torch.where(x > 0, x, s), torch.maximum(x, torch.tensor(s))
// and the calls named in the other tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "frontend/kiln.h"

namespace {

using namespace kiln;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t k53 = (int64_t{1} << 53) + 1, k60 = (int64_t{1} << 60) + 2;
const std::vector<int64_t> kX = {int64_t{1} << 60, k60, int64_t{1} << 53, k53, kMin, kMax, -1, 0};

struct Expected {
  int64_t scalar;
  std::vector<bool> eq;
  std::vector<int64_t> add, mul, where, maximum;
};

// clang-format off
const Expected kExpected[] = {
    {k53, {0, 0, 0, 1, 0, 0, 0, 0},
     {1161928703861587969, 1161928703861587971, 18014398509481985, 18014398509481986, -9214364837600034815, -9214364837600034816, 9007199254740992, 9007199254740993},
     {1152921504606846976, 1170935903116328962, 9007199254740992, 18014398509481985, kMin, 9214364837600034815, -9007199254740993, 0},
     {1152921504606846976, 1152921504606846978, 9007199254740992, 9007199254740993, 9007199254740993, kMax, 9007199254740993, 9007199254740993},
     {1152921504606846976, 1152921504606846978, 9007199254740993, 9007199254740993, 9007199254740993, kMax, 9007199254740993, 9007199254740993}},
    {k60, {0, 1, 0, 0, 0, 0, 0, 0},
     {2305843009213693954, 2305843009213693956, 1161928703861587970, 1161928703861587971, -8070450532247928830, -8070450532247928831, 1152921504606846977, 1152921504606846978},
     {2305843009213693952, 4611686018427387908, 18014398509481984, 1170935903116328962, 0, -1152921504606846978, -1152921504606846978, 0},
     {1152921504606846976, 1152921504606846978, 9007199254740992, 9007199254740993, 1152921504606846978, kMax, 1152921504606846978, 1152921504606846978},
     {1152921504606846978, 1152921504606846978, 1152921504606846978, 1152921504606846978, 1152921504606846978, kMax, 1152921504606846978, 1152921504606846978}},
    {kMin, {0, 0, 0, 0, 1, 0, 0, 0},
     {-8070450532247928832, -8070450532247928830, -9214364837600034816, -9214364837600034815, 0, -1, kMax, kMin},
     {0, 0, 0, kMin, 0, kMin, kMin, 0},
     {1152921504606846976, 1152921504606846978, 9007199254740992, 9007199254740993, kMin, kMax, kMin, kMin},
     {1152921504606846976, 1152921504606846978, 9007199254740992, 9007199254740993, kMin, kMax, -1, 0}},
    {kMax, {0, 0, 0, 0, 0, 1, 0, 0},
     {-8070450532247928833, -8070450532247928831, -9214364837600034817, -9214364837600034816, -1, -2, 9223372036854775806, kMax},
     {-1152921504606846976, -1152921504606846978, -9007199254740992, 9214364837600034815, kMin, 1, -9223372036854775807, 0},
     {1152921504606846976, 1152921504606846978, 9007199254740992, 9007199254740993, kMax, kMax, kMax, kMax},
     {kMax, kMax, kMax, kMax, kMax, kMax, kMax, kMax}},
};
// clang-format on

std::vector<Tensor> i64Ops(const Tensor& x, int64_t s) {
  return {eq(x, s), x + s, x * s, where(x > 0, x, s), maximum(x, s)};
}

void expectAsPyTorch(const std::vector<Tensor>& out, const Expected& e) {
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].toVector<bool>(), e.eq) << "eq";
  EXPECT_EQ(out[1].toVector<int64_t>(), e.add) << "add";
  EXPECT_EQ(out[2].toVector<int64_t>(), e.mul) << "mul";
  EXPECT_EQ(out[3].toVector<int64_t>(), e.where) << "where";
  EXPECT_EQ(out[4].toVector<int64_t>(), e.maximum) << "maximum";
}

TEST(IntegerScalars, I64BeyondTwoTo53CompiledEqualsEagerEqualsPyTorch) {
  const Tensor x = fromVector(kX);
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(::testing::Message() << "scalar " << e.scalar);
    expectAsPyTorch(i64Ops(x, e.scalar), e);
    auto f = compile([s = e.scalar](const Tensor& t) { return i64Ops(t, s); });
    expectAsPyTorch(f(x), e);
  }
}

TEST(IntegerScalars, TheFourScalarsInOneProgram) {
  // Four constants that are two doubles (2^53 + 1 and 2^60 + 2 round to
  // 2^53 and 2^60) in one program, two per kernel: each keeps its own
  // value, and cse, which compares attributes, merges none of them.
  const Tensor x = fromVector(kX);
  auto f = compile([](const Tensor& t) {
    const Tensor two53 = eq(t, int64_t{1} << 53), two60 = eq(t, int64_t{1} << 60);
    return std::vector<Tensor>{where(eq(t, k53), 2, where(two53, 1, 0)), where(eq(t, k60), 2, where(two60, 1, 0))};
  });
  const std::vector<Tensor> out = f(x);
  EXPECT_EQ(out[0].toVector<int64_t>(), (std::vector<int64_t>{0, 0, 1, 2, 0, 0, 0, 0}));
  EXPECT_EQ(out[1].toVector<int64_t>(), (std::vector<int64_t>{1, 2, 0, 0, 0, 0, 0, 0}));
}

TEST(IntegerScalars, I32LimitsCompiledEqualsEagerEqualsPyTorch) {
  // x = torch.tensor([2**31 - 1, -2**31, 7, -1, 0], dtype=torch.int32); x == s, x + s, x * s.
  const int32_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  const Tensor x = fromVector<int32_t>({hi, lo, 7, -1, 0});
  struct Case {
    int64_t scalar;
    std::vector<bool> eq;
    std::vector<int32_t> add, mul;
  };
  const Case cases[] = {
      {hi, {1, 0, 0, 0, 0}, {-2, -1, -2147483642, 2147483646, hi}, {1, lo, 2147483641, -2147483647, 0}},
      {lo, {0, 1, 0, 0, 0}, {-1, 0, -2147483641, hi, lo}, {lo, 0, lo, lo, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "scalar " << c.scalar);
    auto ops = [s = c.scalar](const Tensor& t) { return std::vector<Tensor>{eq(t, s), t + s, t * s}; };
    for (const std::vector<Tensor>& out : {ops(x), compile(ops)(x)}) {
      EXPECT_EQ(out[0].toVector<bool>(), c.eq);
      EXPECT_EQ(out[1].dtype(), DType::i32);
      EXPECT_EQ(out[1].toVector<int32_t>(), c.add);
      EXPECT_EQ(out[2].toVector<int32_t>(), c.mul);
    }
  }
}

TEST(IntegerScalars, FloatOpsRoundAnIntegerScalarOnceAsEagerAndPyTorch) {
  // f64: torch.tensor([2.**53, 2.**53 + 2, 2.**60], dtype=torch.float64) == 2**53 + 1
  // is [True, False, False] (the scalar is the double 2^53), + 2**53 + 1 is
  // [2^54, 2^54, 2^60 + 2^53]; == 2.**60 + 2 (a double, 2^60) is [False, False, True].
  const Tensor d = fromVector<double>({9007199254740992.0, 9007199254740994.0, 1152921504606846976.0});
  auto f64Ops = [](const Tensor& t) { return std::vector<Tensor>{eq(t, k53), t + k53, eq(t, 1152921504606846978.0)}; };
  for (const std::vector<Tensor>& out : {f64Ops(d), compile(f64Ops)(d)}) {
    EXPECT_EQ(out[0].toVector<bool>(), (std::vector<bool>{true, false, false}));
    EXPECT_EQ(out[1].toVector<double>(),
              (std::vector<double>{18014398509481984.0, 18014398509481984.0, 1161928703861587968.0}));
    EXPECT_EQ(out[2].toVector<bool>(), (std::vector<bool>{false, false, true}));
  }
  // f32: torch.tensor([0., 1.]) + (2**60 + 2**36 + 1) is 2^60 + 2^37 in both
  // elements (one rounding; through a double first it would be 2^60), and
  // torch.tensor([2.**60 + 2**37, 2.**60]) == 2**60 + 2**36 + 1 is [True, False].
  const int64_t s = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;
  const float want = 1152921642045800448.0f;
  const Tensor x = fromVector({0, 1});
  const Tensor y = fromVector({want, 1152921504606846976.0f});
  auto f32Ops = [s](const Tensor& a, const Tensor& b) { return std::vector<Tensor>{a + s, eq(b, s)}; };
  for (const std::vector<Tensor>& out : {f32Ops(x, y), compile(f32Ops)(x, y)}) {
    EXPECT_EQ(out[0].toVector(), (std::vector<float>{want, want}));
    EXPECT_EQ(out[1].toVector<bool>(), (std::vector<bool>{true, false}));
  }
}

}  // namespace
