// The CPU target of codegen/target.h: kernels rendered to LLVM IR and
// JIT-compiled (codegen/cpu_compiler.h), loaded on the CPU driver as host
// functions and split over its thread pool; library ops run OpenBLAS and
// kiln's gather loops on host addresses.
#include <fmt/format.h>

#include "codegen/blas_choice.h"
#include "codegen/conv_choice.h"
#include "codegen/cpu_compiler.h"
#include "codegen/lowering_reduction.h"
#include "codegen/target.h"
#include "runtime/attention.h"
#include "runtime/blas.h"
#include "runtime/conv.h"
#include "runtime/error.h"
#include "runtime/indexing.h"
#include "runtime/profiler_events.h"

namespace kiln::codegen {

namespace {
// Kernels split across threads in ranges of whole cache lines; tensors below
// this many elements run on one thread.
constexpr int64_t kGrain = 32768;

class CpuTarget final : public Target {
 public:
  std::string_view name() const override { return "cpu"; }

  std::string description(Device) const override { return cpuTargetDescription(); }

  bool supports(const ir::Node&, std::string*) const override { return true; }

  CompiledKernel compile(const Kernel& kernel, Device device) const override {
    KILN_ASSERT(device.isCpu(), "cpu target asked to compile {} for {}", kernel.name, device.str());
    profiler::RecordFunction range("codegen", "llvm_render_and_jit");
    if (range.event()) [[unlikely]]
      range.event()->detail = kernel.name;
    CompiledCpuKernel cpu = compileCpuKernel(kernel);
    if (range.event() && cpu.fromDiskCache) [[unlikely]]
      range.event()->name = "llvm_load_from_disk_cache";
    CompiledKernel out;
    out.module = runtime::deviceInterface(device).loadModule(
        runtime::KernelImage::hostFunction(kernel.name, cpu.fn, std::move(cpu.keepAlive)));
    out.compileMs = cpu.compileMs;
    out.fromDiskCache = cpu.fromDiskCache;
    return out;
  }

  runtime::LaunchShape launchShape(const Kernel& kernel, const LaunchArgs& launch) const override {
    runtime::LaunchShape shape;
    shape.numel = launch.numel;
    // A reduction kernel splits by whole output rows (lowering_reduction.h).
    shape.grain = kernel.isReduction() ? reductionGrain(kernel, launch) : kGrain;
    return shape;
  }

  const LibraryFunctions& libraries() const override {
    cpuBlasChoice();           // the machine's BLAS, before any matmul runs (Note [Choosing the BLAS])
    installConvChoiceStore();  // Note [Choosing a convolution algorithm] in runtime/conv.cpp
    static const LibraryFunctions cpu{{&runtime::onHost<&runtime::matmul>, false, &runtime::matmulWithEpilogue},
                                      {&runtime::onHost<&runtime::indexSelect>},
                                      {&runtime::onHost<&runtime::indexAdd>},
                                      {&runtime::onHost<&runtime::attention>},
                                      {&runtime::onHost<&runtime::attentionBackward>},
                                      {&runtime::conv, false, &runtime::convWithEpilogue}};
    return cpu;
  }
};

}  // namespace

const Target& cpuTarget() {
  static const CpuTarget cpu;
  return cpu;
}

}  // namespace kiln::codegen
