// 2-d convolutions: the `conv2d`, `conv_transpose2d` and
// `conv2d_backward_weight` library calls of runtime/executable.h
// (docs/convolution.md).
//
// All three are described by one forward convolution, NCHW:
//
//   y[n, o, i, j] = Σ_{c in o's group, p, q}
//                   x[n, c, i·sh + p·dh − pt, j·sw + q·dw − pl] · w[o, c − g·C/G, p, q]
//
// with x [N, C, H, W], w [O, C/G, KH, KW], y [N, O, HO, WO], G groups (O and
// C divisible by G; output channel o is in group o / (O/G)), stride (sh, sw),
// dilation (dh, dw) and top/left padding (pt, pl): x reads as 0 outside
// [0, H) × [0, W). The bottom/right padding is whatever HO and WO imply. The
// three calls compute each of the three tensors from the other two:
//
//   forward     y from x and w                 buffers x, w, y
//   transpose   x from y and w (the gradient   buffers y, w, x
//               of x for y's gradient y, i.e.
//               conv_transpose2d of y)
//   weightGrad  w from x and y (the gradient   buffers x, y, w
//               of w for y's gradient y)
//
// Operands are read through their strides (in elements, NCHW order, never
// negative; channels-last is strides {H·W·C, 1, W·C, C}); the result is
// written contiguous (row-major NCHW / OIHW). Every call writes its whole
// result (a sum over nothing is 0).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/executable.h"

namespace kiln::runtime {

struct ConvCall {
  enum class Kind : uint8_t { forward, transpose, weightGrad };

  Kind kind = Kind::forward;
  DType dtype = DType::f32;
  int64_t n = 0, c = 0, h = 0, w = 0;  ///< x's sizes
  int64_t o = 0, kh = 0, kw = 0;       ///< w is [o, c / groups, kh, kw]
  int64_t ho = 0, wo = 0;              ///< y is [n, o, ho, wo]
  int64_t strideH = 1, strideW = 1, padTop = 0, padLeft = 0, dilationH = 1, dilationW = 1, groups = 1;
  /// The strides (elements, NCHW / OIHW order) of the operands the call
  /// reads: x, w, y as they appear; the written one's are ignored
  /// (contiguous).
  std::array<int64_t, 4> xStrides{}, wStrides{}, yStrides{};

  /// The bottom and right padding HO and WO imply (may be negative when the
  /// last rows or columns of x are never read).
  int64_t padBottom() const { return (ho - 1) * strideH + (kh - 1) * dilationH + 1 - h - padTop; }
  int64_t padRight() const { return (wo - 1) * strideW + (kw - 1) * dilationW + 1 - w - padLeft; }

  /// The op the call runs: "conv2d", "conv_transpose2d" or
  /// "conv2d_backward_weight" (for errors).
  const char* opName() const;
  /// "x [N, C, H, W], w [O, C/G, KH, KW], y [N, O, HO, WO], f32" (for errors).
  std::string str() const;

  /// As the step's integer arguments, and back.
  std::vector<int64_t> encode() const;
  static ConvCall decode(std::span<const int64_t> args);
};

/// The contiguous strides of an NCHW (or OIHW) tensor of these sizes.
std::array<int64_t, 4> contiguousStrides(int64_t n, int64_t c, int64_t h, int64_t w);

/// The CPU's algorithms (Note [Choosing a convolution algorithm] in
/// runtime/conv.cpp).
enum class ConvAlgorithm : uint8_t { onednn, onednnBlocked, direct };
/// "onednn", "onednn_blocked", "direct" (KILN_CONV_ALGORITHM's values).
std::string_view convAlgorithmName(ConvAlgorithm a);

/// cudnn.benchmark's meaning for kiln's convolutions: the first call of
/// each distinct convolution times the algorithms and keeps the fastest.
/// Off by default; ignored under runtime::deterministic().
void setConvBenchmark(bool enabled);
bool convBenchmark();

/// Where measured choices persist across processes: codegen installs the
/// disk kernel cache (codegen/conv_choice.cpp); without one they live for
/// the process.
struct ConvChoiceStore {
  std::string description;  ///< the machine's, part of every key
  std::function<std::optional<std::string>(const std::string& key)> load;
  std::function<void(const std::string& key, const std::string& value)> save;
};
void setConvChoiceStore(ConvChoiceStore store);

/// The CPU library call (LibraryFn): buffers as ConvCall says, args
/// ConvCall::encode(), on the algorithm chosen for it (Note [Convolution
/// epilogues] in runtime/conv.cpp on chunks).
void conv(const LibraryCall& call);
/// The LibraryFn of a CPU forward convolution step with an epilogue
/// (call.epilogue): buffers x, w, y, then the epilogue kernel's, which runs
/// over the result (each chunk's, as soon as it is computed).
void convWithEpilogue(const LibraryCall& call);

namespace detail {
/// kiln's direct loops on the host for any float dtype
/// (runtime/conv_direct.cpp); buffers as ConvCall says.
void convDirect(const ConvCall& call, std::span<void* const> buffers);
/// Runs the call on oneDNN (runtime/conv_onednn.cpp), on its own layouts
/// (`blocked`) or kiln's; false, having written nothing, when oneDNN has no
/// kernel for it but its reference one, or no oneDNN in the build.
bool oneDnnConv(const ConvCall& call, bool blocked, std::span<void* const> buffers, int threads);
/// oneDNN's implementation for that variant ("brgconv:avx512_core", ...),
/// or "" when oneDnnConv would refuse it.
std::string oneDnnConvImplementation(const ConvCall& call, bool blocked, int threads);
/// The key a measured choice is stored under: "conv-choice/v1/<the
/// machine's description>/<the encoded call>/threads N".
std::string convChoiceKey(const ConvCall& call, int threads, const std::string& description);
/// The algorithms available for the call, in the default order.
std::vector<ConvAlgorithm> convCandidates(const ConvCall& call, int threads);
/// The algorithm conv() runs the call on; measures on `buffers` when the
/// benchmark setting asks for it and nothing is kept (empty buffers: the
/// default instead of measuring).
ConvAlgorithm convAlgorithmFor(const ConvCall& call, int threads, std::span<void* const> buffers);
/// Forces an algorithm where it is available (nullopt: none), replacing
/// KILN_CONV_ALGORITHM: for the tests.
void forceConvAlgorithm(std::optional<ConvAlgorithm> algorithm);
/// Runs forward convolutions in chunks of whole images of at most `bytes`
/// of result (0: the whole call, the default), replacing
/// KILN_CONV_CHUNK_BYTES (Note [Convolution epilogues] in runtime/conv.cpp):
/// for the tests and for measuring.
void setConvChunkBytes(int64_t bytes);
/// Forgets this process's measured choices (the store keeps its own): for
/// the tests.
void forgetConvChoices();
/// How the CPU runs the call now: "onednn_blocked: brgconv:avx512_core",
/// "onednn: gemm:jit", "direct": for kiln-env, kiln-bench and the tests.
std::string convImplementation(const ConvCall& call);
}  // namespace detail

}  // namespace kiln::runtime
