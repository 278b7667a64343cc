// expectEpilogues: runs a function eagerly and compiled and expects the same
// bits, `steps` steps of which `epilogues` library calls with an epilogue
// (Note [Matmul epilogues in compiled programs] in codegen/compile_graph.cpp;
// tests/e2e/matmul_epilogue_test.cpp and conv_epilogue_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "frontend/kiln.h"
#include "tests/common/same_bits.h"

namespace kiln::testutil {

using EpilogueFn = std::function<Tensor(const std::vector<Tensor>&)>;

inline void expectEpilogues(const std::string& what, const EpilogueFn& fn, const std::vector<Tensor>& inputs, int steps,
                            int epilogues) {
  SCOPED_TRACE(what);
  const Tensor eager = fn(inputs);
  detail::CompileEngine engine([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; },
                               CompileOptions{});
  const std::vector<Tensor> compiled = engine.call(inputs);
  ASSERT_EQ(compiled.size(), 1u);
  EXPECT_TRUE(sameBits(compiled[0], eager));
  EXPECT_EQ(engine.lastNumKernels(), steps) << engine.lastGraph();
  EXPECT_EQ(engine.lastNumEpilogues(), epilogues) << engine.lastGraph();
}

}  // namespace kiln::testutil
