// EXPECT_KERNELS(graph, n): a fusion test states how many kernels a graph
// must take, and prints the graph (its schedule) when it does not.
#pragma once

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "ir/printer.h"

#define EXPECT_KERNELS(graph, n) \
  EXPECT_EQ(::kiln::ir::countKernels(graph), (n)) << "schedule:\n" << ::kiln::ir::printGraph(graph)
