// The vector width of kiln's CPU kernels: the preferred width on AVX-512
// hosts, the vectorization factor of loops that widen f32 to f64, and the
// interleaving of loops with long bodies.
//
// Note [Vector width of kiln's kernels]
// Three defaults of LLVM's cost model made transcendental-heavy kernels
// run at half or a quarter of what the host's vector units give
// (docs/fusion.md, "Transcendentals on AVX-512", has the llvm-mca cycle
// counts, scripts/loop-cycles.py makes them):
//
//  1. LLVM tunes most Intel AVX-512 CPUs (skylake-avx512, cascadelake,
//     icelake-server, sapphirerapids, ...) to prefer 256-bit vectors, to
//     avoid the clock drop 512-bit instructions cause in code that uses
//     them briefly. kiln's kernels are long loops of arithmetic, the case
//     AVX-512 is for (oneDNN and PyTorch's ATen kernels use it there too),
//     so every function gets "prefer-vector-width"="512" wherever
//     AVX-512F is on. On skylake-avx512 this halves the cycles per element
//     of GELU (10.9 -> 5.8). AMD's Zen 4 already prefers 512.
//  2. The loop vectorizer sizes a loop's vectorization factor by its widest
//     type: a loop that computes in f32 and widens to f64 (an f32 value
//     summed in f64, sin and cos computed in f64) ran 8 f32 lanes per
//     512-bit register (4 on AVX2). An innermost loop that widens f32 to
//     f64 (fpext) and has no width of its own gets
//     `llvm.loop.vectorize.width` = vectorBits / 32: its f32 values fill
//     the registers and each f64 value takes two. The hint only chooses
//     the factor of an elementwise loop, whose lanes are independent, so no
//     result changes. A float sum's loop keeps the width it was rendered
//     with (Note [Fixed summation order]: its order depends on it), so the
//     reduction renderer computes a pass's sum operands in a loop of their
//     own where they cost more than the sum (Note [Sums at full width],
//     codegen/llvm_reduction.cpp).
//  3. The vectorizer interleaves a loop (several independent vectors per
//     iteration) only when its body is small. exp, sigmoid and GELU are
//     chains of 30-100 dependent operations of 3-4 cycles each: one vector
//     at a time, the out-of-order window holds too few iterations to hide
//     the chain's latency, and the loop runs at its latency, not its
//     throughput (softmax's exp pass: 26.6 cycles per 16 elements one at a
//     time, 83 per 64 four at a time). An innermost loop of kLongBody to
//     kHugeBody instructions with no interleave count of its own gets 4
//     (32 vector registers: AVX-512) or 2 (16: AVX2).
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Metadata.h>
#include <llvm/Transforms/Utils/LoopUtils.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/llvm_module.h"

namespace kiln::codegen::llvmcg {

namespace {

/// Loop bodies (instructions before vectorization) of [kLongBody,
/// kHugeBody) are interleaved: an exp is about 40, softmax's values 59,
/// chain8_math 67. From kHugeBody on (GELU 164, dropout's draw loop 167,
/// randn 377) the body has independent chains enough, and copies of it
/// would double the kernel's compile time for little.
constexpr size_t kLongBody = 32;
constexpr size_t kHugeBody = 128;

/// Whether `loop` widens f32 values into f64 (a sum's accumulator).
bool widensF32ToF64(const llvm::Loop& loop) {
  for (const llvm::BasicBlock* block : loop.blocks())
    for (const llvm::Instruction& in : *block)
      if (const auto* ext = llvm::dyn_cast<llvm::FPExtInst>(&in))
        if (ext->getSrcTy()->isFloatTy() && ext->getDestTy()->isDoubleTy()) return true;
  return false;
}

size_t bodySize(const llvm::Loop& loop) {
  size_t n = 0;
  for (const llvm::BasicBlock* block : loop.blocks()) n += block->size();
  return n;
}

bool hasHint(const llvm::Loop& loop, const char* name) {
  return llvm::findStringMetadataForLoop(&loop, name).has_value();
}

/// Adds hint `name` = `value` to the loop's metadata, keeping its others.
void addHint(llvm::Loop& loop, const char* name, unsigned value) {
  llvm::LLVMContext& ctx = loop.getHeader()->getContext();
  llvm::Metadata* hint[] = {llvm::MDString::get(ctx, name),
                            llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), value))};
  loop.setLoopID(llvm::makePostTransformationMetadata(ctx, loop.getLoopID(), {name}, {llvm::MDNode::get(ctx, hint)}));
}

}  // namespace

int kernelVectorBits(const std::vector<std::string>& features, int preferred) {
  const bool avx512 = std::find(features.begin(), features.end(), "+avx512f") != features.end();
  return avx512 ? std::max(preferred, 512) : preferred;
}

void setVectorWidths(llvm::Module& module, int vectorBits) {
  if (vectorBits <= 0) return;
  const unsigned f32Lanes = static_cast<unsigned>(vectorBits / 32);
  const unsigned interleave = vectorBits >= 512 ? 4 : 2;
  for (llvm::Function& fn : module) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("prefer-vector-width", std::to_string(vectorBits));
    if (f32Lanes < 2) continue;
    llvm::DominatorTree dominators(fn);
    llvm::LoopInfo loops(dominators);
    for (llvm::Loop* loop : loops.getLoopsInPreorder()) {
      if (!loop->isInnermost()) continue;
      // A loop with a width of its own keeps it, and its interleaving: a
      // float sum's fixed order (Note [Fixed summation order]) depends on them.
      if (hasHint(*loop, "llvm.loop.vectorize.width")) continue;
      if (widensF32ToF64(*loop)) addHint(*loop, "llvm.loop.vectorize.width", f32Lanes);
      const size_t size = bodySize(*loop);
      if (size >= kLongBody && size < kHugeBody && !hasHint(*loop, "llvm.loop.interleave.count"))
        addHint(*loop, "llvm.loop.interleave.count", interleave);
    }
  }
}

}  // namespace kiln::codegen::llvmcg
