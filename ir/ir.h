// The IR layer's contract (DESIGN.md §1, §3, §4): the op registry generated
// from ir/Ops.def, tensor types, the SSA Graph, the scalar formulas, the
// text printer and parser, the verifier, and strided layouts (how movement
// ops view their inputs). It knows nothing of tensors or of how graphs are
// run.
#pragma once

#include "ir/attributes.h"
#include "ir/graph.h"
#include "ir/layout.h"
#include "ir/op_registry.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/scalar_eval.h"
#include "ir/types.h"
#include "ir/verifier.h"
