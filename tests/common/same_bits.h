// sameBits(a, b): whether two tensors have one type and the same bits,
// element for element (any NaN equal to any NaN: kernels need not agree on
// NaN payloads), naming the first element that differs; for the tests that
// compare compiled results with eager ones.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/tensor.h"

inline ::testing::AssertionResult sameBits(const kiln::Tensor& a, const kiln::Tensor& b) {
  if (a.type() != b.type()) return ::testing::AssertionFailure() << a.type().str() << " vs " << b.type().str();
  const std::vector<double> x = a.to(kiln::DType::f64).toVector<double>();
  const std::vector<double> y = b.to(kiln::DType::f64).toVector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<uint64_t>(x[i]) != std::bit_cast<uint64_t>(y[i]) && !(std::isnan(x[i]) && std::isnan(y[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

/// sameBits(a, b) for tensors that may be undefined (a gradient that was
/// never made): both undefined is the same; `what` names them on failure.
inline ::testing::AssertionResult sameBits(const kiln::Tensor& a, const kiln::Tensor& b, const std::string& what) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << what << ": one is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = sameBits(a, b);
  if (!r) return ::testing::AssertionFailure() << what << ": " << r.message();
  return r;
}
