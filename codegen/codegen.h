// The codegen layer's contract (DESIGN.md §1, §6): lowering of fusion nodes
// to Kernels, the renderers (LLVM IR for the CPU; one C-family renderer
// with a CUDA C dialect for NVRTC and an OpenCL C dialect for the OpenCL
// compiler), the kernel cache, and compileGraph(), which turns a fused graph
// into a runtime::Executable.
#pragma once

#include "codegen/c_renderer.h"
#include "codegen/compile_graph.h"
#include "codegen/cpu_compiler.h"
#include "codegen/kernel.h"
#include "codegen/kernel_cache.h"
#include "codegen/lowering.h"
#include "codegen/lowering_reduction.h"
#include "codegen/nvrtc_compiler.h"
#include "codegen/opencl_compiler.h"
#include "codegen/plan_memory.h"
