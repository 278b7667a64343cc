// Kernels and element values of every dtype, shared by the renderer tests
// (llvm_dtypes_test.cpp runs them against the C++ evaluator; the GPU tests
// of gpu_kernel_cases.h build and run them): every elementwise op on every dtype the registry
// lets it take, cast between every pair of dtypes, buffers of raw elements
// with special and random values, and element-wise comparison in which every
// NaN equals every other.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "ir/op_registry.h"
#include "ir/scalar_eval.h"
#include "runtime/error.h"
#include "runtime/numeric.h"

namespace kiln::codegen::testing {

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16,   DType::f64,
                                       DType::i32, DType::i64, DType::boolean};

/// One op on operands of given dtypes.
struct OpCase {
  ir::Op op;
  std::vector<DType> in;
  DType out;
  ir::Attributes attrs;
  std::string label;  ///< "add_f16", "cast_f32_i32": a C identifier
};

/// Every elementwise op on every dtype it takes, and cast for every pair.
inline std::vector<OpCase> allOpCases() {
  std::vector<OpCase> cases;
  for (DType d : kAllDTypes) {
    for (const ir::OpInfo& info : ir::allOps()) {
      if (info.kind != ir::OpKind::elementwise || info.op == ir::Op::cast) continue;
      std::vector<DType> in(static_cast<size_t>(info.arity), d);
      if (info.op == ir::Op::where) in[0] = DType::boolean;
      std::vector<ir::TensorType> types;
      for (DType t : in) types.push_back({t, {}, Device::cpu()});
      try {
        const DType out = ir::inferType(info.op, types, {}).dtype;
        cases.push_back({info.op, in, out, {}, std::string(info.name) + "_" + std::string(dtypeName(d))});
        if (info.op == ir::Op::gelu)  // and its other formula
          cases.push_back({info.op, in, out, {{"approximate", int64_t{1}}}, "gelu_tanh_" + std::string(dtypeName(d))});
      } catch (const Error&) {
        // The registry rejects this op on d (exp on i32, add on bool): nothing to render.
      }
    }
    for (DType to : kAllDTypes)
      cases.push_back({ir::Op::cast,
                       {d},
                       to,
                       {{"dtype", to}},
                       "cast_" + std::string(dtypeName(d)) + "_" + std::string(dtypeName(to))});
  }
  return cases;
}

/// out = op(load p0, ..., load pk): rank 1, contiguous.
inline Kernel oneOpKernel(const OpCase& c) {
  using namespace instr;
  Kernel k;
  k.name = "kiln_test_" + c.label;
  k.rank = 1;
  std::vector<int> operands;
  for (size_t i = 0; i < c.in.size(); ++i) {
    k.params.push_back({c.in[i], false, InnerStride::one});
    k.body.push_back(load(static_cast<int>(i), c.in[i]));
    operands.push_back(static_cast<int>(i));
  }
  k.params.push_back({c.out, true, InnerStride::one});
  k.body.push_back(op(c.op, operands, c.attrs, c.out));
  k.body.push_back(store(static_cast<int>(c.in.size()), static_cast<int>(c.in.size()), c.out));
  return k;
}

/// A reduction kernel over rank-2 [rows, cols], reducing cols: x (in) -> out (outer).
inline Kernel rowKernel(const std::string& name, DType in, DType out, std::vector<ScalarInstr> body) {
  Kernel k;
  k.name = name;
  k.rank = 2;
  k.reduceRank = 1;
  k.params = {{in, false, InnerStride::one, false}, {out, true, InnerStride::zero, true}};
  k.body = std::move(body);
  return k;
}

using Buffer = std::vector<uint8_t>;

inline ir::ScalarValue readElement(const Buffer& b, DType d, size_t i) {
  const uint8_t* p = b.data() + i * static_cast<size_t>(itemSize(d));
  ir::ScalarValue v;
  v.dtype = d;
  switch (d) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      v.f = f;
      break;
    }
    case DType::f64: std::memcpy(&v.f, p, 8); break;
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v.f = f16BitsToF32(h);
      break;
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v.f = bf16BitsToF32(h);
      break;
    }
    case DType::i32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      v.i = x;
      break;
    }
    case DType::i64: std::memcpy(&v.i, p, 8); break;
    case DType::boolean: v.i = *p != 0; break;
  }
  return v;
}

/// The bytes a kernel stores for `v` (a value of its dtype, exactly).
inline void writeElement(Buffer& b, size_t i, const ir::ScalarValue& v) {
  uint8_t* p = b.data() + i * static_cast<size_t>(itemSize(v.dtype));
  if (isFloatingPoint(v.dtype))
    storeAs(p, v.dtype, v.f);
  else
    storeIntAs(p, v.dtype, v.i);
}

inline bool sameElement(const Buffer& a, const Buffer& b, DType d, size_t i) {
  const size_t size = static_cast<size_t>(itemSize(d));
  if (std::memcmp(a.data() + i * size, b.data() + i * size, size) == 0) return true;
  if (!isFloatingPoint(d)) return false;
  return std::isnan(readElement(a, d, i).f) && std::isnan(readElement(b, d, i).f);
}

inline std::string elementStr(const Buffer& b, DType d, size_t i) {
  const ir::ScalarValue v = readElement(b, d, i);
  return isFloatingPoint(d) ? fmt::format("{} ({:a})", v.f, v.f) : fmt::format("{}", v.i);
}

/// n elements of `d`: special values first, then random ones from several
/// ranges (and random bit patterns for the floats).
inline Buffer testElements(DType d, size_t n, uint32_t seed) {
  Buffer b(n * static_cast<size_t>(itemSize(d)));
  std::mt19937_64 rng(seed);
  size_t i = 0;
  auto put = [&](double v) {
    if (i < n) storeAs(b.data() + i++ * static_cast<size_t>(itemSize(d)), d, v);
  };
  auto putInt = [&](int64_t v) {
    if (i < n) storeIntAs(b.data() + i++ * static_cast<size_t>(itemSize(d)), d, v);
  };
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  if (isFloatingPoint(d)) {
    for (double v :
         {0.0,    -0.0,   inf,   -inf,   nan,     1.0,     -1.0,         0.5,          -0.5,  1.0 / 3, 2.5,
          -2.5,   3.5,    0.625, -0.625, 65504.0, 65520.0, -65519.0,     6e-8,         -3e-8, 1e-5,    1e-40,
          -1e-40, 1e-310, 1e10,  -1e10,  3e9,     -3e9,    1e20,         88.0,         -88.0, 89.0,    -104.0,
          709.0,  -745.0, 1e300, -1e300, 20.0,    -20.0,   2147483647.5, -2147483648.5})
      put(v);
  } else if (d == DType::boolean) {
    putInt(0);
    putInt(1);
  } else {
    for (int64_t v : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{2}, int64_t{INT32_MAX}, int64_t{INT32_MIN},
                      int64_t{INT64_MAX}, int64_t{INT64_MIN}, int64_t{65536}, int64_t{-46341}, int64_t{16777217}})
      putInt(v);
  }
  std::uniform_real_distribution<double> small(-10, 10), wide(-1e5, 1e5);
  std::uniform_int_distribution<uint64_t> bits;
  while (i < n) {
    if (d == DType::boolean) {
      putInt(static_cast<int64_t>(bits(rng) & 1));
      continue;
    }
    switch (i % 4) {
      case 0: put(small(rng)); break;
      case 1: put(wide(rng)); break;
      case 2:
        if (d == DType::f64)
          put(std::bit_cast<double>(bits(rng)));
        else if (isFloatingPoint(d))
          put(std::bit_cast<float>(static_cast<uint32_t>(bits(rng))));
        else
          putInt(static_cast<int64_t>(bits(rng)));
        break;
      case 3: put(small(rng) * 1e-3); break;
    }
  }
  return b;
}

}  // namespace kiln::codegen::testing
