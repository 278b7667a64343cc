// EXPECT_KERNELS(graph, n): a fusion test states how many kernels a graph
// must take, and prints the graph (its schedule) when it does not. The
// count is ir::countKernels: the steps codegen::compileGraph makes of the
// graph (a cat is one copy kernel per input with elements, a view read only
// by library calls none, a library call one; tests/unit/codegen/
// count_kernels_test.cpp checks it against Executable::numKernels()).
#pragma once

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ir/printer.h"

#define EXPECT_KERNELS(graph, n) \
  EXPECT_EQ(::kiln::ir::countKernels(graph), (n)) << "schedule:\n" << ::kiln::ir::printGraph(graph)
