// The host side of the CPU backend: the host target (CPU name and features),
// the O3 pipeline, and one process-wide ORC LLJIT that turns rendered kernels
// into callable functions.
//
// Every kernel gets its own LLVMContext (so rendering needs no lock) and its
// own JITDylib (so two kernels with the same name never clash and each can be
// unloaded on its own when the last copy of its keepAlive goes). One mutex
// guards the JIT; each compiling thread optimizes and emits with a
// TargetMachine of its own (Note [Kernels compile in parallel]). LLVM is
// built without exceptions: every llvm::Error stops here and becomes a
// kiln::Error that names the kernel.
//
// Kernels go through the disk cache (codegen/disk_cache.h) as object code:
// a miss renders, optimizes and emits an object file with the same
// TargetMachine settings the JIT uses, stores it, and links it into the JIT;
// a hit links the stored object, skipping the optimizer and instruction
// selection. Both paths run the same bytes. The key holds the target
// description, the pipeline, and kiln's build ID with the kernel's signature
// (or, in a build without an ID, the unoptimized IR), so kiln's renderers
// can change without stale entries (Note [Disk keys without rendering]).
//
// The TargetMachine uses FPOpFusion::Strict, and the IR carries no fast-math
// flags, so neither the optimizer nor instruction selection forms an FMA
// (Note [Eager equals compiled] in ir/scalar_formulas.h).
#include <llvm/Analysis/TargetTransformInfo.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/TargetParser/X86TargetParser.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codegen/build_id.h"
#include "codegen/cpu_compiler.h"
#include "codegen/disk_cache.h"
#include "codegen/llvm_module.h"
#include "runtime/error.h"

namespace kiln::codegen {

namespace llvmcg {

namespace {

/// The host's features as "+name"/"-name", sorted, so that the description a
/// cache keys on does not depend on hash-map order.
std::vector<std::string> hostFeatures() {
  std::vector<std::string> features;
  for (const auto& feature : llvm::sys::getHostCPUFeatures())
    features.push_back((feature.second ? "+" : "-") + feature.first().str());
  std::sort(features.begin(), features.end());
  return features;
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const std::string& part : parts) s += (s.empty() ? "" : ",") + part;
  return s;
}

/// Note [KILN_CPU]
/// KILN_CPU=<LLVM CPU name> makes the CPU backend compile for that CPU
/// (its features as LLVM knows them, its tuning: the preferred vector
/// width, the cost model) instead of the host's, so that one machine can
/// produce, inspect (irdump --emit=llvm-opt) and run the code another kind
/// of machine would get: an AMD Zen 4 runs the kernels an Intel
/// skylake-avx512 or an AVX2-only znver3 gets. Only CPUs whose every
/// instruction-set extension the host has are accepted (anything else
/// could execute an instruction the host lacks); x86 only. The name and its features are
/// part of cpuTargetDescription(), hence of every disk-cache key.
bool kernelCanUse(std::string_view feature) {
  // Instruction-set extensions the optimizer may emit in a kernel; system
  // features (pku, sgx, pconfig, ...) never reach one, and VMs hide them.
  for (std::string_view prefix : {"avx", "sse", "ssse", "fma", "f16c", "amx", "bmi", "gfni", "vaes", "vpclmulqdq",
                                  "popcnt", "lzcnt", "adx", "movbe", "sha", "aes", "pclmul", "cx16"})
    if (feature.starts_with(prefix)) return true;
  return false;
}

std::vector<std::string> forcedCpuFeatures(const std::string& triple, const std::string& cpu,
                                           const std::vector<std::string>& host) {
  if (!llvm::Triple(triple).isX86())
    fail("KILN_CPU={}: choosing the CPU is supported on x86 hosts only (this one is {})", cpu, triple);
  if (!llvm::X86::parseArchX86(cpu, /*Only64Bit=*/true)) {
    llvm::SmallVector<llvm::StringRef, 64> names;
    llvm::X86::fillValidCPUArchList(names, /*Only64Bit=*/true);
    std::string valid;
    for (llvm::StringRef n : names) valid += (valid.empty() ? "" : ", ") + n.str();
    fail("KILN_CPU={}: not an x86-64 CPU LLVM knows; one of: {}", cpu, valid);
  }
  llvm::SmallVector<llvm::StringRef, 64> implied;
  llvm::X86::getFeaturesForCPU(cpu, implied, /*NeedPlus=*/false);
  std::vector<std::string> features, missing;
  for (llvm::StringRef f : implied) {
    const std::string name = f.str();
    if (kernelCanUse(name) && std::find(host.begin(), host.end(), "+" + name) == host.end()) missing.push_back(name);
    features.push_back("+" + name);
  }
  if (!missing.empty())
    fail("KILN_CPU={}: this host ({}) lacks {} of its features ({}): its code could not run here", cpu,
         llvm::sys::getHostCPUName().str(), missing.size(), join(missing));
  std::sort(features.begin(), features.end());
  return features;
}

/// The LLJIT and what the optimizer needs, created on first use.
struct Jit {
  std::mutex mutex;
  std::string triple;
  std::string cpu;
  std::vector<std::string> features;
  std::unique_ptr<llvm::TargetMachine> machine;  ///< for the probes of the constructor only
  /// What each compiling thread's TargetMachine is made from (threadMachine).
  std::optional<llvm::orc::JITTargetMachineBuilder> machineBuilder;
  std::unique_ptr<llvm::DataLayout> dataLayout;
  std::unique_ptr<llvm::orc::LLJIT> lljit;  ///< under mutex
  int vectorBits = 0;                       ///< kernelVectorBits: what setVectorWidths asks for
  bool kilnTuning = true;                   ///< Note [KILN_VECTOR_TUNING]
  uint64_t nextDylib = 0;                   ///< under mutex

  Jit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    triple = llvm::sys::getProcessTriple();
    cpu = llvm::sys::getHostCPUName().str();
    features = hostFeatures();
    if (const char* forced = std::getenv("KILN_CPU"); forced && *forced) {
      features = forcedCpuFeatures(triple, forced, features);
      cpu = forced;
    }

    llvm::orc::JITTargetMachineBuilder builder{llvm::Triple(triple)};
    builder.setCPU(cpu);
    builder.addFeatures(features);
    builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    builder.getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;

    auto tm = builder.createTargetMachine();
    if (!tm) fail("llvm: cannot create a target machine for {} ({}): {}", triple, cpu, llvm::toString(tm.takeError()));
    machine = std::move(*tm);
    dataLayout = std::make_unique<llvm::DataLayout>(machine->createDataLayout());
    vectorBits = kernelVectorBits(features, preferredVectorBits());
    if (const char* tuning = std::getenv("KILN_VECTOR_TUNING"); tuning && *tuning) {
      const std::string_view t = tuning;
      if (t != "kiln" && t != "llvm") fail("KILN_VECTOR_TUNING={}: expected kiln (the default) or llvm", t);
      kilnTuning = t == "kiln";
    }
    if (!kilnTuning) vectorBits = preferredVectorBits();

    machineBuilder = builder;
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(builder)).create();
    if (!jit) fail("llvm: cannot create the ORC JIT for {} ({}): {}", triple, cpu, llvm::toString(jit.takeError()));
    lljit = std::move(*jit);
  }

  /// The width LLVM's vectorizers ask the target for on a function without
  /// attributes (the CPU's tuning: some AVX-512 CPUs prefer 256 bits).
  int preferredVectorBits() {
    llvm::LLVMContext context;
    llvm::Module module("kiln_vector_width_probe", context);
    module.setDataLayout(*dataLayout);
    llvm::Function* probe = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(context), false),
                                                   llvm::Function::ExternalLinkage, "kiln_vector_width_probe", module);
    const llvm::TargetTransformInfo tti = machine->getTargetTransformInfo(*probe);
    return static_cast<int>(tti.getRegisterBitWidth(llvm::TargetTransformInfo::RGK_FixedWidthVector).getFixedValue());
  }

  /// Never destroyed: kernels' keepAlives may outlive any static destructor
  /// order we could pick, and each of them unloads through this JIT.
  static Jit& get() {
    static Jit* jit = new Jit();
    return *jit;
  }
};

/// The CPU side of Note [Kernels compile in parallel] (codegen/kernel_cache.cpp):
/// a TargetMachine is not thread-safe, so each thread that optimizes and
/// emits kernels has its own, made once from the JIT's settings; only
/// linking into the JIT takes jit.mutex. Rendering, the O3 pipeline and
/// instruction selection of several kernels then run at once.
llvm::TargetMachine& threadMachine(Jit& jit) {
  thread_local std::unique_ptr<llvm::TargetMachine> machine;
  thread_local const Jit* owner = nullptr;
  if (!machine || owner != &jit) {
    auto tm = jit.machineBuilder->createTargetMachine();
    if (!tm)
      fail("llvm: cannot create a target machine for {} ({}): {}", jit.triple, jit.cpu, llvm::toString(tm.takeError()));
    machine = std::move(*tm);
    owner = &jit;
  }
  return *machine;
}

/// The O3 pipeline on `module`, with this thread's TargetMachine.
void optimizeWith(Jit& jit, llvm::TargetMachine& machine, llvm::Module& module) {
  if (jit.kilnTuning) setVectorWidths(module, jit.vectorBits);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopInterleaving = true;
  tuning.LoopUnrolling = true;
  llvm::PassBuilder passes(&machine, tuning);
  passes.registerModuleAnalyses(mam);
  passes.registerCGSCCAnalyses(cgam);
  passes.registerFunctionAnalyses(fam);
  passes.registerLoopAnalyses(lam);
  passes.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager pipeline = passes.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  pipeline.run(module, mam);
}

/// Holds one kernel's JITDylib; the last keepAlive copy unloads it.
struct LoadedKernel {
  Jit* jit;
  llvm::orc::JITDylib* dylib;

  LoadedKernel(Jit* j, llvm::orc::JITDylib* d) : jit(j), dylib(d) {}
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
  ~LoadedKernel() {
    std::lock_guard<std::mutex> lock(jit->mutex);
    // A destructor cannot throw: an unload failure is reported, not raised.
    llvm::logAllUnhandledErrors(jit->lljit->getExecutionSession().removeJITDylib(*dylib), llvm::errs(),
                                "kiln: unloading a CPU kernel: ");
  }
};

}  // namespace

/// Note [KILN_VECTOR_TUNING]
/// KILN_VECTOR_TUNING=llvm turns off what Note [Vector width of kiln's
/// kernels] and Note [Sums at full width] add to LLVM's choices, so that
/// kiln-bench can compare the two in one build on one machine
/// (docs/fusion.md); the default is `kiln`. It is part of
/// cpuTargetDescription(), hence of the disk-cache keys.
bool kilnVectorTuning() { return Jit::get().kilnTuning; }

void setHostTarget(llvm::Module& module) {
  Jit& jit = Jit::get();
  module.setTargetTriple(jit.triple);
  module.setDataLayout(*jit.dataLayout);
}

void optimizeModule(llvm::Module& module) {
  Jit& jit = Jit::get();
  optimizeWith(jit, threadMachine(jit), module);
}

}  // namespace llvmcg

namespace llvmcg {
namespace {

/// What else than the IR the object code depends on; bump when the
/// optimization pipeline or the object emission changes.
constexpr const char* kPipeline = "O3 loop+slp vectorize, interleave, unroll; kernel vector widths v1; object file v1";

/// The optimized module as an object file, made with this thread's
/// TargetMachine (Note [Kernels compile in parallel]).
std::string emitObject(Jit& jit, llvm::Module& module, const std::string& name) {
  llvm::TargetMachine& machine = threadMachine(jit);
  optimizeWith(jit, machine, module);
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream out(buffer);
  llvm::legacy::PassManager passes;
  if (machine.addPassesToEmitFile(passes, out, nullptr, llvm::CodeGenFileType::ObjectFile))
    fail("llvm: the target machine cannot emit an object file for kernel {}", name);
  passes.run(module);
  return std::string(buffer.begin(), buffer.end());
}

/// Links `object` into a new JITDylib and finds `name` in it; the caller
/// holds jit.mutex.
CompiledCpuKernel linkLocked(Jit& jit, const std::string& object, const std::string& name) {
  auto dylib = jit.lljit->createJITDylib(name + "#" + std::to_string(jit.nextDylib++));
  if (!dylib) fail("llvm: cannot create a JITDylib for kernel {}: {}", name, llvm::toString(dylib.takeError()));
  // On failure the dylib goes away again, under the lock we already hold.
  auto failWith = [&](const char* what, llvm::Error err) {
    std::string message = llvm::toString(std::move(err));
    llvm::consumeError(jit.lljit->getExecutionSession().removeJITDylib(*dylib));
    fail("llvm: cannot {} kernel {}: {}", what, name, message);
  };
  if (llvm::Error err = jit.lljit->addObjectFile(*dylib, llvm::MemoryBuffer::getMemBufferCopy(object, name)))
    failWith("add to the JIT", std::move(err));
  auto symbol = jit.lljit->lookup(*dylib, name);
  if (!symbol) failWith("link", symbol.takeError());
  CompiledCpuKernel compiled;
  compiled.fn = symbol->toPtr<runtime::CpuKernelFn>();
  compiled.keepAlive = std::make_shared<const LoadedKernel>(&jit, &*dylib);
  return compiled;
}

}  // namespace
}  // namespace llvmcg

std::string cpuKernelCacheKey(const Kernel& kernel) {
  const std::string& build = codegenBuildId();
  if (build.empty()) return {};
  // The name too: it is the symbol the object file defines.
  return "cpu\n" + cpuTargetDescription() + "\n" + llvmcg::kPipeline + "\nkiln build " + build + "\n" + kernel.str();
}

CompiledCpuKernel compileCpuKernel(const Kernel& kernel) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  llvmcg::validateKernel(kernel);
  llvmcg::Jit& jit = llvmcg::Jit::get();

  // Note [Disk keys without rendering]: the signature says everything the
  // renderers read and the build ID which renderers read it, so a build
  // with an ID looks kernels up without rendering them (a hit costs the
  // file read and the link). Without one, the key is the rendered IR.
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  auto render = [&] {
    context = std::make_unique<llvm::LLVMContext>();
    module = llvmcg::renderModule(kernel, *context);
  };
  std::string key = cpuKernelCacheKey(kernel);
  if (key.empty()) {
    render();
    key = "cpu\n" + cpuTargetDescription() + "\n" + llvmcg::kPipeline + "\n";
    llvm::raw_string_ostream keyOut(key);
    module->print(keyOut, nullptr);
    keyOut.flush();
  }

  DiskCache& disk = DiskCache::instance();
  std::optional<std::string> object = disk.load(key);
  const bool fromDisk = object.has_value();
  if (!fromDisk) {
    // Outside the lock: each kernel has its own context, each thread its
    // own TargetMachine (Note [Kernels compile in parallel]).
    if (!module) render();
    object = llvmcg::emitObject(jit, *module, kernel.name);
    disk.store(key, *object);
  }
  std::lock_guard<std::mutex> lock(jit.mutex);
  CompiledCpuKernel compiled = llvmcg::linkLocked(jit, *object, kernel.name);
  compiled.fromDiskCache = fromDisk;
  compiled.compileMs = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return compiled;
}

std::string vectorIsaOf(const std::vector<std::string>& features) {
  auto has = [&](std::string_view name) {
    return std::find(features.begin(), features.end(), "+" + std::string(name)) != features.end();
  };
  // Widest first.
  for (const auto& [feature, isa] : {std::pair<const char*, const char*>{"avx512f", "AVX-512"},
                                     {"avx2", "AVX2"},
                                     {"avx", "AVX"},
                                     {"sse4.2", "SSE4.2"},
                                     {"sse2", "SSE2"},
                                     {"sve", "SVE"},
                                     {"neon", "NEON"}})
    if (has(feature)) return isa;
  return "none";
}

CpuVectorTarget cpuVectorTarget() {
  llvmcg::Jit& jit = llvmcg::Jit::get();
  CpuVectorTarget t;
  t.cpu = jit.cpu;
  t.isa = vectorIsaOf(jit.features);
  t.vectorBits = jit.vectorBits;  // Note [Vector width of kiln's kernels]
  return t;
}

std::string cpuTargetDescription() {
  llvmcg::Jit& jit = llvmcg::Jit::get();
  return "LLVM " LLVM_VERSION_STRING " " + jit.triple + " " + jit.cpu + " " + llvmcg::join(jit.features) +
         (jit.kilnTuning ? "" : " tuning=llvm");
}

}  // namespace kiln::codegen
