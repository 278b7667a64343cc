// cuDNN on CUDA devices, loaded at run time (Note [cuDNN is loaded at run
// time] in runtime/cuda_dnn.cpp): kiln's convolution library call
// (runtime/conv.h, ConvCall) on cuda:N through cuDNN 9's convolution API
// (cudnnConvolutionForward / BackwardData / BackwardFilter), on the call's
// stream, with its workspace from kiln's device allocator. No CUDA header
// here; the translation of a ConvCall into cuDNN's descriptors is a pure
// function (detail::planDnnConv) so the host tests check it without a GPU
// (docs/convolution.md, "CUDA: cuDNN").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/conv.h"
#include "runtime/dtype.h"
#include "runtime/executable.h"

namespace kiln::runtime::cuda {

/// Whether cuDNN loads with every entry point kiln calls, from the
/// candidates of runtime/cuda_libraries.h (libraryCandidates(Library::cudnn):
/// $KILN_CUDNN_LIBRARY alone when set, else libcudnn.so.9, then the toolkit
/// folders); `why` says why not.
bool dnnAvailable(std::string* why = nullptr);

/// "cuDNN 9.19.0 (libcudnn.so.9)", or "cuDNN unavailable".
std::string dnnVersion();

/// The CUDA LibraryFn of conv2d, conv_transpose2d and
/// conv2d_backward_weight: buffers as ConvCall says, args ConvCall::encode().
/// kiln::Error when cuDNN is unavailable or fails, when the device cannot be
/// used, or when a size does not fit cuDNN's 32-bit ints.
void conv(const LibraryCall& call);

namespace detail {

/// One 4-d tensor as cuDNN's descriptors take it (NCHW order).
struct DnnTensor {
  std::array<int, 4> dims{}, strides{};
  bool operator==(const DnnTensor&) const = default;
};

/// How conv() runs a ConvCall on cuDNN: everything it derives from the call
/// alone (the descriptors' contents and which buffer is which).
struct DnnConvPlan {
  ConvCall::Kind kind = ConvCall::Kind::forward;
  DType dtype = DType::f32;                   ///< the tensors' data type
  DType computeType = DType::f32;             ///< f32 for f16/bf16/f32, f64 for f64
  bool tensorOps = false;                     ///< CUDNN_TENSOR_OP_MATH (f16, bf16); else CUDNN_FMA_MATH (no TF32)
  int xBuffer = 0, wBuffer = 1, yBuffer = 2;  ///< indices into the call's buffers
  /// Nothing to compute: every dim of the result is nonzero but a sum is
  /// over nothing (or all of x is padding), so the result is filled with 0.
  bool zeroFill = false;
  bool empty = false;  ///< the result has no elements: nothing runs
  /// x, y as cuDNN sees them. With explicitPadding, x is the padded copy
  /// (packed, padX dims) rather than the call's x.
  DnnTensor x, y;
  std::array<int, 4> w{};  ///< the filter [o, c / groups, kh, kw], always packed
  /// w is read (forward, transpose) with strides that are not packed OIHW:
  /// it is copied to a packed scratch first (cudnnTransformTensor).
  bool copyW = false;
  DnnTensor wRead;  ///< w's dims and strides as the call reads it (when copyW)
  int padH = 0, padW = 0, strideH = 1, strideW = 1, dilationH = 1, dilationW = 1, groups = 1;
  /// The padding is asymmetric in a way cuDNN's symmetric padding cannot
  /// express (Note [Asymmetric padding on cuDNN]): x is handled through a
  /// zero-padded packed scratch of dims x.dims with padding 0.
  bool explicitPadding = false;
  /// With explicitPadding: the part of the call's x that lies in the padded
  /// window (dims [n, c, rows, cols], the call's strides for a read x, the
  /// contiguous ones for a written x) and where it sits in the scratch
  /// (element offsets of its first element; strides are x.strides there).
  DnnTensor xInside;
  int64_t xInsideOffset = 0;      ///< in the scratch
  int64_t xInsideCallOffset = 0;  ///< in the call's x (non-zero for a negative padding)
  int64_t resultElements = 0;
};

/// The plan of `call`; kiln::Error naming the op and shapes when a size or
/// stride does not fit cuDNN's ints.
DnnConvPlan planDnnConv(const ConvCall& call);

/// What loading cuDNN from `candidates` gives: the candidate that loaded,
/// its version ("cuDNN 9.19.0"), the entry points resolved, or why it is
/// not usable. A fresh attempt each call, for tests; kiln loads once.
struct CudnnLoad {
  std::string library;
  std::string version;
  std::vector<std::string> entryPoints;
  std::string error;
};
CudnnLoad loadCudnn(std::span<const std::string> candidates);

/// How conv() picks an algorithm (Note [Choosing a cuDNN algorithm] in
/// runtime/cuda_dnn.cpp): deterministic() wins over convBenchmark().
enum class DnnChoiceMode : uint8_t { heuristic, deterministic, benchmark };
DnnChoiceMode dnnChoiceMode(bool deterministic, bool benchmark);

/// One algorithm as cuDNN's Get/Find queries report it.
struct DnnCandidate {
  int algo = 0;
  bool succeeded = false;      ///< status CUDNN_STATUS_SUCCESS
  bool deterministic = false;  ///< CUDNN_DETERMINISTIC
  bool tensorOpMath = false;   ///< CUDNN_TENSOR_OP_MATH(_ALLOW_CONVERSION)
};
/// The index of the first candidate conv() may run (in the query's order:
/// best first): succeeded, deterministic when `deterministicOnly`, and not
/// tensor-op math unless `tensorOps` (the plan's: f16/bf16); nullopt when
/// none is.
std::optional<size_t> firstUsableCandidate(std::span<const DnnCandidate> candidates, bool tensorOps,
                                           bool deterministicOnly);

/// Forgets the process's algorithm choices: for the tests.
void forgetDnnChoices();

}  // namespace detail

}  // namespace kiln::runtime::cuda
