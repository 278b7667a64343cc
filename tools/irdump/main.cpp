// irdump: read, check, transform and inspect kiln graphs, like mlir-opt.
//
//   irdump FILE.kir --passes=canonicalize,cse,dce,fuse-elementwise
//   irdump --example chain8 --passes=fuse-elementwise --print-ir-after-all
//   irdump --example bias_relu --passes=fuse-elementwise --emit=llvm
//   irdump --example softmax --passes=fuse-reductions --emit=opencl
//   irdump FILE.kir --verify-diagnostics
//   irdump --example mlp --passes=fuse-elementwise --emit=memory-plan
//   irdump --example ddp_train_step --passes=dce,fuse-elementwise --emit=memory-plan
//
// Input is a .kir file ('-' or nothing: standard input) cut into chunks at
// `// -----` lines, each parsed, verified and processed on its own, or a
// built-in model (--example). Exit codes: 0 success, 1 invalid input (the
// message on stderr), 2 bad usage.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

#include "codegen/codegen.h"
#include "codegen/disk_cache.h"
#include "frontend/kiln.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "tools/common/models.h"
#include "tools/irdump/diagnostics.h"
#include "tools/irdump/dot.h"

namespace {

using namespace kiln;

struct Options {
  std::string example;
  std::string file;
  std::string pipeline;
  std::string emit = "ir";
  bool printAfterAll = false;
  bool printAfterChange = false;
  std::set<std::string> printBefore;
  std::set<std::string> printAfter;
  bool verifyEach = false;
  bool verifyDiagnostics = false;
  bool remarks = false;
  bool statistics = false;
  bool timing = false;
  bool dot = false;
  std::string dotPng;
};

constexpr const char* kEmits[] = {"ir", "kernel", "llvm", "llvm-opt", "cuda", "opencl", "memory-plan"};

void printHelp() {
  std::cout << "usage: irdump [FILE.kir | - | --example NAME] [options]\n"
               "\n"
               "Reads kiln graphs (a .kir file, standard input, or a built-in model), verifies them, runs a pass\n"
               "pipeline and prints the result: the IR, each fusion node's kernel, or a Graphviz drawing.\n"
               "A file is cut at `// -----` lines into chunks processed one by one.\n"
               "\n"
               "options:\n"
               "  --example NAME            trace the built-in model NAME (see --list-examples)\n"
               "  --list-examples           list the built-in models\n"
               "  --passes=P1,P2,...        run this pass pipeline\n"
               "  --print-ir-after-all      print the IR before the pipeline and after every pass\n"
               "  --print-ir-after-change   print the IR after every pass that changed it\n"
               "  --print-ir-before=P,...   print the IR before each run of these passes\n"
               "  --print-ir-after=P,...    print the IR after each run of these passes\n"
               "  --verify-each             verify the graph after every pass\n"
               "  --verify-diagnostics      check `// expected-error@+N {{...}}` lines against the errors\n"
               "  --emit=ir|kernel|llvm|llvm-opt|cuda|opencl|memory-plan\n"
               "                            what to print: the IR (default), each fusion node's kernel,\n"
               "                            its LLVM IR before or after O3, its CUDA C or OpenCL C (each\n"
               "                            with the launch shape it expects), or the program\n"
               "                            compileGraph makes, with its memory plan (which intermediates\n"
               "                            share a buffer; the graph must be fused) and the schedule of its\n"
               "                            collectives (each all-reduce's start and wait, and the steps between)\n"
               "  --dot                     print the graph as Graphviz, fusion nodes as clusters\n"
               "  --dot-png FILE            render that drawing to FILE with Graphviz `dot`\n"
               "  --remarks                 print why each pair of ops was fused or not\n"
               "  --pass-statistics         print what each pass did\n"
               "  --pass-timing             print how long each pass took\n"
               "  --clear-kernel-cache      remove the compiled kernels of the disk cache ($KILN_CACHE_DIR,\n"
               "                            else ~/.cache/kiln) and exit\n"
               "  --help                    this text\n"
               "\n"
               "exit codes: 0 success, 1 invalid input, 2 bad usage, 3 an internal error (a kiln bug)\n"
               "\n"
               "passes:\n";
  for (const auto& p : passes::allPasses())
    std::printf("  %-22s  %s\n", std::string(p.name).c_str(), std::string(p.summary).c_str());
}

std::set<std::string> splitList(std::string_view list) {
  std::set<std::string> out;
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (comma) out.insert(std::string(list.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

bool parseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    std::string v;
    auto value = [&](std::string_view flag) {
      if (a.starts_with(std::string(flag) + "=")) {
        v = std::string(a.substr(flag.size() + 1));
        return true;
      }
      if (a == flag && i + 1 < argc) {
        v = argv[++i];
        return true;
      }
      return false;
    };
    if (a == "--help" || a == "-h") {
      printHelp();
      std::exit(0);
    } else if (a == "--clear-kernel-cache") {
      codegen::DiskCache& cache = codegen::DiskCache::instance();
      if (cache.directory().empty()) {
        std::printf("the kernel disk cache is off (KILN_CACHE_DIR=off): nothing to clear\n");
      } else {
        const int64_t removed = cache.clear();
        std::printf("removed %lld kernels from %s\n", static_cast<long long>(removed), cache.directory().c_str());
      }
      std::exit(0);
    } else if (a == "--list-examples") {
      for (const auto& m : tools::models()) std::printf("%-20s %s\n", m.name.c_str(), m.summary.c_str());
      std::exit(0);
    } else if (value("--example")) {
      o.example = v;
    } else if (value("--passes")) {
      o.pipeline = v;
    } else if (value("--emit")) {
      o.emit = v;
    } else if (value("--print-ir-before")) {
      o.printBefore.merge(splitList(v));
    } else if (value("--print-ir-after")) {
      o.printAfter.merge(splitList(v));
    } else if (value("--dot-png")) {
      o.dotPng = v;
    } else if (a == "--print-ir-after-all") {
      o.printAfterAll = true;
    } else if (a == "--print-ir-after-change") {
      o.printAfterChange = true;
    } else if (a == "--verify-each") {
      o.verifyEach = true;
    } else if (a == "--verify-diagnostics") {
      o.verifyDiagnostics = true;
    } else if (a == "--remarks") {
      o.remarks = true;
    } else if (a == "--pass-statistics") {
      o.statistics = true;
    } else if (a == "--pass-timing") {
      o.timing = true;
    } else if (a == "--dot") {
      o.dot = true;
    } else if ((!a.starts_with("-") || a == "-") && o.file.empty()) {
      o.file = std::string(a);
    } else {
      std::cerr << "irdump: unknown argument '" << a << "' (see --help)\n";
      return false;
    }
  }
  if (!o.example.empty() && !o.file.empty()) {
    std::cerr << "irdump: give a file or --example NAME, not both (see --help)\n";
    return false;
  }
  if (std::find(std::begin(kEmits), std::end(kEmits), o.emit) == std::end(kEmits)) {
    std::cerr << "irdump: unknown --emit=" << o.emit
              << "; expected ir, kernel, llvm, llvm-opt, cuda, opencl or memory-plan\n";
    return false;
  }
  if (o.verifyDiagnostics && !o.example.empty()) {
    std::cerr << "irdump: --verify-diagnostics reads a file, not --example\n";
    return false;
  }
  return true;
}

/// The kernel's source in dialect `d`, after a comment with its launch shape.
std::string gpuSource(const codegen::Kernel& kernel, const codegen::CDialect& d) {
  const codegen::RenderedKernel r = codegen::renderGpuKernel(kernel, d);
  const char* unit = r.launch.unit == codegen::GpuLaunch::Unit::row       ? "a row per work-group"
                     : r.launch.unit == codegen::GpuLaunch::Unit::vector4 ? "4 elements per work-item"
                                                                          : "an element per work-item";
  return fmt::format("// launch: {} work-items per group{}, {}, {} bytes of shared memory, {} argument words\n{}",
                     r.launch.localSize, r.launch.localSizeRequired ? " (required)" : "", unit, r.launch.sharedBytes,
                     r.argWords, r.source);
}

void emitKernels(const ir::Graph& g, const std::string& emit) {
  for (const ir::Node* n : g.nodes()) {
    if (n->op() != ir::Op::fusion && !codegen::isReductionNode(*n)) continue;
    for (const codegen::LoweredKernel& lowered : codegen::lowerKernels(*n)) {
      if (emit == "kernel")
        std::cout << lowered.kernel.str();
      else if (emit == "cuda" || emit == "opencl")
        std::cout << gpuSource(lowered.kernel, emit == "cuda" ? codegen::cudaDialect() : codegen::openclDialect());
      else
        std::cout << codegen::renderLlvmIr(lowered.kernel, emit == "llvm-opt");
      std::cout << "\n";
    }
  }
}

void renderPng(const std::string& dot, const std::string& file) {
  KILN_CHECK(std::system("command -v dot > /dev/null 2>&1") == 0,
             "irdump: --dot-png needs Graphviz's `dot` (Debian package graphviz), which is not installed");
  std::string command = "dot -Tpng -o '" + file + "'";
  FILE* pipe = popen(command.c_str(), "w");
  KILN_CHECK(pipe, "irdump: cannot run `{}`", command);
  std::fwrite(dot.data(), 1, dot.size(), pipe);
  KILN_CHECK(pclose(pipe) == 0, "irdump: `{}` failed", command);
}

/// Runs the pipeline on one graph and prints what the options ask for.
void processGraph(ir::Graph& g, const Options& o) {
  passes::PassManager pm(o.pipeline);
  if (o.verifyEach) pm.setVerifyEach(true);
  if (o.printAfterAll) std::cout << "// -----// IR before the pipeline //----- //\n" << ir::printGraph(g) << "\n";
  pm.setHook([&](std::string_view pass, const ir::Graph& graph, bool after, bool changed) {
    const std::string name(pass);
    if (!after && o.printBefore.count(name))
      std::cout << "// -----// IR before " << pass << " //----- //\n" << ir::printGraph(graph) << "\n";
    if (!after) return;
    if (o.printAfterAll || o.printAfter.count(name) || (o.printAfterChange && changed))
      std::cout << "// -----// IR after " << pass << " //----- //\n" << ir::printGraph(graph) << "\n";
  });
  pm.run(g);

  if (o.remarks)
    for (const auto& r : pm.remarks()) std::cout << "remark: [" << r.pass << "] " << r.message << "\n";
  if (o.statistics)
    for (const auto& [pass, stats] : pm.statistics())
      for (const auto& [name, n] : stats) std::cout << "statistic: " << pass << "." << name << " = " << n << "\n";
  if (o.timing) {
    double total = 0;
    for (const auto& t : pm.timings()) {
      std::printf("timing: %-20s %9.3f ms%s\n", t.pass.c_str(), t.ms, t.changed ? "  (changed)" : "");
      total += t.ms;
    }
    std::printf("timing: %-20s %9.3f ms\n", "total", total);
  }
  if (o.dot || !o.dotPng.empty()) {
    std::string dot = tools::toDot(g);
    if (o.dot) std::cout << dot;
    if (!o.dotPng.empty()) renderPng(dot, o.dotPng);
  } else if (o.emit == "ir") {
    if (!o.printAfterAll) std::cout << ir::printGraph(g);
  } else if (o.emit == "memory-plan") {
    std::cout << codegen::describeMemoryPlan(codegen::compileGraph(g, codegen::graphDevice(g)));
  } else {
    emitKernels(g, o.emit);
  }
}

std::string readInput(const std::string& file) {
  std::ostringstream text;
  if (file.empty() || file == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream in(file, std::ios::binary);
    KILN_CHECK(in, "irdump: cannot read {}", file);
    text << in.rdbuf();
  }
  return text.str();
}

/// Parses and verifies one chunk, then processes each of its graphs.
void processChunk(const ir::SourceChunk& chunk, const std::string& name, const Options& o) {
  ir::ParseResult parsed = ir::parseSource(chunk.text, name, chunk.firstLine);
  for (auto& g : parsed.graphs) ir::verify(*g, &parsed.locations);
  for (auto& g : parsed.graphs) processGraph(*g, o);
}

int run(const Options& o) {
  if (!o.example.empty()) {
    const tools::Model* model = tools::findModel(o.example);
    KILN_CHECK(model, "irdump: no example named '{}' (see --list-examples)", o.example);
    Trace trace = kiln::trace(model->fn, model->inputs, model->name);
    ir::verify(*trace.graph);
    processGraph(*trace.graph, o);
    return 0;
  }
  const std::string name = o.file.empty() || o.file == "-" ? "<stdin>" : o.file;
  const std::string text = readInput(o.file);
  if (o.verifyDiagnostics) {
    std::ostringstream discard;  // the IR of chunks that pass is not the point here
    auto* saved = std::cout.rdbuf(discard.rdbuf());
    int failures = tools::verifyDiagnostics(text, name, [&](const ir::SourceChunk& c) { processChunk(c, name, o); });
    std::cout.rdbuf(saved);
    return failures == 0 ? 0 : 1;
  }
  bool first = true;
  for (const ir::SourceChunk& chunk : ir::splitInputFile(text)) {
    if (!first) std::cout << "// -----\n";
    first = false;
    processChunk(chunk, name, o);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parseArgs(argc, argv, options)) return 2;
  try {
    return run(options);
  } catch (const kiln::Error& e) {
    std::cout.flush();
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const kiln::InternalError& e) {
    std::cout.flush();
    std::cerr << e.what() << "\n";
    return 3;
  }
}
