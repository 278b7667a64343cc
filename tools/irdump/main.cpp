// irdump: inspect kiln graphs and what the passes and codegen make of them.
//
//   irdump --example chain8 --passes=dce,fuse-elementwise --print-ir-after-all
//   irdump --example bias_relu --passes=fuse-elementwise --emit=llvm
//
// Exit codes: 0 success, 1 invalid input (message on stderr), 2 bad usage.
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include "codegen/codegen.h"
#include "frontend/kiln.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "tools/common/models.h"

namespace {

using namespace kiln;

struct Options {
  std::string example;
  std::string pipeline;
  std::string emit = "ir";
  bool printAfterAll = false;
  bool remarks = false;
  bool statistics = false;
  std::string file;
};

void printHelp() {
  std::cout << "usage: irdump (--example NAME | FILE.kir) [options]\n"
               "\n"
               "Prints a kiln graph, optionally after a pass pipeline, or the kernels of its fusion nodes.\n"
               "\n"
               "options:\n"
               "  --example NAME          trace the built-in model NAME (see --list-examples)\n"
               "  --list-examples         list the built-in models\n"
               "  --passes=P1,P2,...      run this pass pipeline\n"
               "  --print-ir-after-all    print the IR before the pipeline and after every pass\n"
               "  --emit=ir|kernel|llvm|llvm-opt|cuda\n"
               "                          what to print at the end: the IR (default), each fusion node's\n"
               "                          kernel, its LLVM IR before or after O3, or its CUDA C\n"
               "  --remarks               print why each pair of ops was fused or not\n"
               "  --pass-statistics       print what each pass did\n"
               "  --help                  this text\n"
               "\n"
               "passes:\n";
  for (const auto& p : passes::allPasses()) std::printf("  %-22s  %s\n", std::string(p.name).c_str(), std::string(p.summary).c_str());
}

bool parseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view flag, std::string& out) {
      if (a.starts_with(std::string(flag) + "=")) {
        out = std::string(a.substr(flag.size() + 1));
        return true;
      }
      if (a == flag && i + 1 < argc) {
        out = argv[++i];
        return true;
      }
      return false;
    };
    if (a == "--help" || a == "-h") {
      printHelp();
      std::exit(0);
    } else if (a == "--list-examples") {
      for (const auto& m : tools::models()) std::printf("%-20s %s\n", m.name.c_str(), m.summary.c_str());
      std::exit(0);
    } else if (value("--example", o.example) || value("--passes", o.pipeline) || value("--emit", o.emit)) {
    } else if (a == "--print-ir-after-all") {
      o.printAfterAll = true;
    } else if (a == "--remarks") {
      o.remarks = true;
    } else if (a == "--pass-statistics") {
      o.statistics = true;
    } else if (!a.starts_with("-") && o.file.empty()) {
      o.file = std::string(a);
    } else {
      std::cerr << "irdump: unknown argument '" << a << "' (see --help)\n";
      return false;
    }
  }
  if (o.example.empty() == o.file.empty()) {
    std::cerr << "irdump: give one of --example NAME or a .kir file (see --help)\n";
    return false;
  }
  if (o.emit != "ir" && o.emit != "kernel" && o.emit != "llvm" && o.emit != "llvm-opt" && o.emit != "cuda") {
    std::cerr << "irdump: unknown --emit=" << o.emit << "; expected ir, kernel, llvm, llvm-opt or cuda\n";
    return false;
  }
  return true;
}

void emitKernels(const ir::Graph& g, const std::string& emit) {
  for (const ir::Node* n : g.nodes()) {
    if (n->op() != ir::Op::fusion) continue;
    codegen::LoweredKernel lowered = codegen::lowerFusion(*n);
    if (emit == "kernel")
      std::cout << lowered.kernel.str();
    else if (emit == "cuda")
      std::cout << codegen::renderCudaC(lowered.kernel);
    else
      std::cout << codegen::renderLlvmIr(lowered.kernel, emit == "llvm-opt");
    std::cout << "\n";
  }
}

int run(const Options& o) {
  if (!o.file.empty())
    fail("irdump: reading {}: the .kir parser does not exist yet; use --example NAME", o.file);
  const tools::Model* model = tools::findModel(o.example);
  KILN_CHECK(model, "irdump: no example named '{}' (see --list-examples)", o.example);
  Trace trace = kiln::trace(model->fn, model->inputs, model->name);
  ir::Graph& g = *trace.graph;

  passes::PassManager pm(o.pipeline);
  if (o.printAfterAll) {
    std::cout << "// -----// IR before the pipeline //----- //\n" << ir::printGraph(g) << "\n";
    pm.setHook([](std::string_view pass, const ir::Graph& graph, bool after, bool) {
      if (after) std::cout << "// -----// IR after " << pass << " //----- //\n" << ir::printGraph(graph) << "\n";
    });
  }
  pm.run(g);

  if (o.remarks)
    for (const auto& r : pm.remarks()) std::cout << "remark: [" << r.pass << "] " << r.message << "\n";
  if (o.statistics)
    for (const auto& [pass, stats] : pm.statistics())
      for (const auto& [name, n] : stats) std::cout << "statistic: " << pass << "." << name << " = " << n << "\n";
  if (o.emit == "ir") {
    if (!o.printAfterAll) std::cout << ir::printGraph(g);
  } else {
    emitKernels(g, o.emit);
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
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const kiln::InternalError& e) {
    std::cerr << e.what() << "\n";
    return 3;
  }
}
