// cuDNN behind runtime/cuda_dnn.h. The plan (planDnnConv) is built in every
// configuration; with KILN_HAVE_CUDNN (the toolkit's cudnn.h and cuda.h
// were found) cuDNN is loaded at run time, and without it every entry point
// says that kiln was built without cuDNN's headers.
#include "runtime/cuda_dnn.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "runtime/cuda_libraries.h"
#include "runtime/device_interface.h"
#include "runtime/dynamic_library.h"
#include "runtime/error.h"

#if KILN_HAVE_CUDNN
#include <cudnn.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include "runtime/cuda_api.h"
#include "runtime/determinism.h"
#endif

namespace kiln::runtime::cuda {

namespace {

int toInt(int64_t v, const char* what, const ConvCall& c) {
  KILN_CHECK(v >= 0 && v <= INT_MAX, "{}: {} = {} does not fit cuDNN's 32-bit ints ({})", c.opName(), what, v, c.str());
  return static_cast<int>(v);
}

/// A descriptor of `dims` read through `strides`; the stride of a size-1
/// dim is made the packed one (it is never stepped, and cuDNN checks it).
detail::DnnTensor tensor(std::array<int64_t, 4> dims, std::array<int64_t, 4> strides, const ConvCall& c) {
  detail::DnnTensor t;
  int64_t inner = 1;
  for (int d = 3; d >= 0; --d) {
    const int64_t stride = dims[d] == 1 ? inner : strides[d];
    t.dims[d] = toInt(dims[d], "a size", c);
    t.strides[d] = toInt(stride, "a stride", c);
    inner = std::max(inner, dims[d] * stride);
  }
  return t;
}

bool packed(std::array<int64_t, 4> dims, std::array<int64_t, 4> strides) {
  const std::array<int64_t, 4> p = contiguousStrides(dims[0], dims[1], dims[2], dims[3]);
  for (int d = 0; d < 4; ++d)
    if (dims[d] != 1 && strides[d] != p[d]) return false;
  return true;
}

/// Whether cuDNN's symmetric padding `pad` on both sides gives `out`
/// outputs from `in` inputs: its output size floor((in + 2·pad − span) / s)
/// + 1 is `out` when 0 ≤ pad − padEnd < s (padEnd: what kiln's call implies).
bool symmetricFits(int64_t pad, int64_t padEnd, int64_t stride) {
  return pad >= 0 && pad - padEnd >= 0 && pad - padEnd < stride;
}

}  // namespace

namespace detail {

// Note [Asymmetric padding on cuDNN]
// A ConvCall pads x by padTop/padLeft and by whatever ho/wo imply at the
// bottom/right (ConvCall::padBottom); cuDNN's convolution descriptor pads
// both sides alike and checks that y's size is its floor formula's. PyTorch's
// convolutions (and conv_transpose2d with output_padding < stride) always fit
// it: padTop − padBottom lies in [0, stride). Any other call — a pad larger
// at the bottom, a bottom never read by more than a stride — is run exactly
// on an explicitly padded x: a packed scratch of the window the convolution
// reads ([-padTop, h + padBottom) × [-padLeft, w + padRight)), zero-filled,
// with the part of x inside it copied in (cudnnTransformTensor), convolved
// with padding 0 (its size is exactly cuDNN's formula's). For
// conv_transpose2d the gradient is computed on that scratch and its inside
// copied to the zero-filled result (rows of x never read get 0, as on the
// CPU). It costs a copy of x, so only calls that need it take it.
DnnConvPlan planDnnConv(const ConvCall& c) {
  DnnConvPlan p;
  p.kind = c.kind;
  p.dtype = c.dtype;
  KILN_CHECK(c.dtype == DType::f32 || c.dtype == DType::f64 || c.dtype == DType::f16 || c.dtype == DType::bf16,
             "{}: cuDNN has no convolution of {} ({})", c.opName(), dtypeName(c.dtype), c.str());
  p.computeType = c.dtype == DType::f64 ? DType::f64 : DType::f32;
  p.tensorOps = c.dtype == DType::f16 || c.dtype == DType::bf16;
  switch (c.kind) {
    case ConvCall::Kind::forward: p.xBuffer = 0, p.wBuffer = 1, p.yBuffer = 2; break;
    case ConvCall::Kind::transpose: p.yBuffer = 0, p.wBuffer = 1, p.xBuffer = 2; break;
    case ConvCall::Kind::weightGrad: p.xBuffer = 0, p.yBuffer = 1, p.wBuffer = 2; break;
  }
  const int64_t cg = c.groups > 0 ? c.c / c.groups : 0;
  switch (c.kind) {
    case ConvCall::Kind::forward: p.resultElements = c.n * c.o * c.ho * c.wo; break;
    case ConvCall::Kind::transpose: p.resultElements = c.n * c.c * c.h * c.w; break;
    case ConvCall::Kind::weightGrad: p.resultElements = c.o * cg * c.kh * c.kw; break;
  }
  p.empty = p.resultElements == 0;
  if (p.empty) return p;
  // With every result element there, a zero size anywhere is a sum over
  // nothing (or over padding alone).
  for (int64_t size : {c.n, c.c, c.h, c.w, c.o, c.kh, c.kw, c.ho, c.wo})
    if (size == 0) p.zeroFill = true;

  p.strideH = toInt(c.strideH, "the stride", c), p.strideW = toInt(c.strideW, "the stride", c);
  p.dilationH = toInt(c.dilationH, "the dilation", c), p.dilationW = toInt(c.dilationW, "the dilation", c);
  p.groups = toInt(c.groups, "groups", c);
  KILN_CHECK(p.strideH > 0 && p.strideW > 0 && p.dilationH > 0 && p.dilationW > 0 && p.groups > 0,
             "{}: stride, dilation and groups must be positive ({})", c.opName(), c.str());
  p.w = {toInt(c.o, "o", c), toInt(cg, "c / groups", c), toInt(c.kh, "kh", c), toInt(c.kw, "kw", c)};
  const bool xRead = c.kind != ConvCall::Kind::transpose, yRead = c.kind != ConvCall::Kind::forward,
             wRead = c.kind != ConvCall::Kind::weightGrad;
  const std::array<int64_t, 4> xDims{c.n, c.c, c.h, c.w}, yDims{c.n, c.o, c.ho, c.wo}, wDims{c.o, cg, c.kh, c.kw};
  const std::array<int64_t, 4> xStrides = xRead ? c.xStrides : contiguousStrides(c.n, c.c, c.h, c.w);
  p.y = tensor(yDims, yRead ? c.yStrides : contiguousStrides(c.n, c.o, c.ho, c.wo), c);
  if (wRead && !packed(wDims, c.wStrides)) {
    p.copyW = true;
    p.wRead = tensor(wDims, c.wStrides, c);
  }

  const int64_t pb = c.padBottom(), pr = c.padRight();
  if (symmetricFits(c.padTop, pb, c.strideH) && symmetricFits(c.padLeft, pr, c.strideW)) {
    p.padH = toInt(c.padTop, "the padding", c), p.padW = toInt(c.padLeft, "the padding", c);
    p.x = tensor(xDims, xStrides, c);
    return p;
  }
  if (p.zeroFill) return p;
  // Note [Asymmetric padding on cuDNN]: the window read, rows [-padTop,
  // h + pb), and the part of x inside it.
  p.explicitPadding = true;
  const int64_t rows = c.h + c.padTop + pb, cols = c.w + c.padLeft + pr;
  const int64_t top = std::max<int64_t>(0, -c.padTop), bottom = std::min(c.h, c.h + pb);
  const int64_t left = std::max<int64_t>(0, -c.padLeft), right = std::min(c.w, c.w + pr);
  p.x = tensor({c.n, c.c, rows, cols}, contiguousStrides(c.n, c.c, rows, cols), c);
  if (bottom <= top || right <= left) {  // x lies outside the window: only padding is read
    p.explicitPadding = false;
    p.zeroFill = true;
    return p;
  }
  p.xInside = tensor({c.n, c.c, bottom - top, right - left}, xStrides, c);
  p.xInsideOffset = (top + c.padTop) * cols + (left + c.padLeft);
  p.xInsideCallOffset = top * xStrides[2] + left * xStrides[3];  // non-zero only for a negative padding
  return p;
}

DnnChoiceMode dnnChoiceMode(bool deterministic, bool benchmark) {
  if (deterministic) return DnnChoiceMode::deterministic;
  return benchmark ? DnnChoiceMode::benchmark : DnnChoiceMode::heuristic;
}

std::optional<size_t> firstUsableCandidate(std::span<const DnnCandidate> candidates, bool tensorOps,
                                           bool deterministicOnly) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    const DnnCandidate& r = candidates[i];
    if (!r.succeeded || (deterministicOnly && !r.deterministic) || (!tensorOps && r.tensorOpMath)) continue;
    return i;
  }
  return std::nullopt;
}

}  // namespace detail

#if KILN_HAVE_CUDNN

// Note [cuDNN is loaded at run time]
// As cuBLAS (Note [cuBLAS is loaded at run time] in runtime/cuda_blas.cpp),
// cuDNN is opened with dlopen on first use from kiln-env's candidates
// (runtime/cuda_libraries.h: $KILN_CUDNN_LIBRARY alone, else libcudnn.so.9
// by the loader's search then in the toolkit folders), so it is not a
// needed library of libkiln.so. cuDNN 9's libcudnn.so.9 is a small shim
// that exports the whole C API and loads libcudnn_ops / libcudnn_cnn /
// libcudnn_graph from its own folder when first called, so every entry
// point below is resolved from it with dlsym. kiln uses the convolution API
// (cudnn_cnn.h: tensor, filter and convolution descriptors,
// cudnnConvolutionForward / BackwardData / BackwardFilter), which cuDNN 9
// still ships (marked deprecated in favour of the graph API, with the same
// engines behind it): one call per op, no graph to build, finalize and cache
// per shape, and its Find/Get algorithm queries are cudnn.benchmark's and
// deterministic mode's in PyTorch. A handle is made per (device, thread), on
// first use, in the device's primary context, and set to the call's stream
// before every call; handles are never destroyed (as cuBLAS's).

namespace {

using FwdPerf = cudnnConvolutionFwdAlgoPerf_t;
using DataPerf = cudnnConvolutionBwdDataAlgoPerf_t;
using FilterPerf = cudnnConvolutionBwdFilterAlgoPerf_t;

struct CudnnApi {
  std::string error;
  std::string library;
  std::string version;
  std::vector<std::string> entryPoints;
  decltype(&::cudnnGetVersion) getVersion = nullptr;
  decltype(&::cudnnGetErrorString) errorString = nullptr;
  decltype(&::cudnnCreate) create = nullptr;
  decltype(&::cudnnSetStream) setStream = nullptr;
  decltype(&::cudnnCreateTensorDescriptor) createTensor = nullptr;
  decltype(&::cudnnDestroyTensorDescriptor) destroyTensor = nullptr;
  decltype(&::cudnnSetTensorNdDescriptor) setTensor = nullptr;
  decltype(&::cudnnCreateFilterDescriptor) createFilter = nullptr;
  decltype(&::cudnnDestroyFilterDescriptor) destroyFilter = nullptr;
  decltype(&::cudnnSetFilterNdDescriptor) setFilter = nullptr;
  decltype(&::cudnnCreateConvolutionDescriptor) createConv = nullptr;
  decltype(&::cudnnDestroyConvolutionDescriptor) destroyConv = nullptr;
  decltype(&::cudnnSetConvolution2dDescriptor) setConv = nullptr;
  decltype(&::cudnnSetConvolutionGroupCount) setGroups = nullptr;
  decltype(&::cudnnSetConvolutionMathType) setMath = nullptr;
  decltype(&::cudnnTransformTensor) transform = nullptr;
  decltype(&::cudnnGetConvolutionForwardAlgorithmMaxCount) fwdCount = nullptr;
  decltype(&::cudnnGetConvolutionForwardAlgorithm_v7) fwdGet = nullptr;
  decltype(&::cudnnFindConvolutionForwardAlgorithmEx) fwdFind = nullptr;
  decltype(&::cudnnGetConvolutionForwardWorkspaceSize) fwdWorkspace = nullptr;
  decltype(&::cudnnConvolutionForward) fwd = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataAlgorithmMaxCount) dataCount = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataAlgorithm_v7) dataGet = nullptr;
  decltype(&::cudnnFindConvolutionBackwardDataAlgorithmEx) dataFind = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataWorkspaceSize) dataWorkspace = nullptr;
  decltype(&::cudnnConvolutionBackwardData) data = nullptr;
  decltype(&::cudnnGetConvolutionBackwardFilterAlgorithmMaxCount) filterCount = nullptr;
  decltype(&::cudnnGetConvolutionBackwardFilterAlgorithm_v7) filterGet = nullptr;
  decltype(&::cudnnFindConvolutionBackwardFilterAlgorithmEx) filterFind = nullptr;
  decltype(&::cudnnGetConvolutionBackwardFilterWorkspaceSize) filterWorkspace = nullptr;
  decltype(&::cudnnConvolutionBackwardFilter) filter = nullptr;
};

CudnnApi loadApi(std::span<const std::string> candidates) {
  CudnnApi api;
  const DynamicLibrary library = DynamicLibrary::open(candidates);
  if (!library.loaded()) {
    api.error = fmt::format(
        "cuDNN could not be loaded ({}); install cuDNN 9 for CUDA 13 (libcudnn.so.9) "
        "or set KILN_CUDNN_LIBRARY to its path",
        library.error());
    return api;
  }
  api.library = library.name();
  SymbolResolver resolve(library, api.entryPoints, api.error);
  resolve("cudnnGetVersion", api.getVersion);
  resolve("cudnnGetErrorString", api.errorString);
  resolve("cudnnCreate", api.create);
  resolve("cudnnSetStream", api.setStream);
  resolve("cudnnCreateTensorDescriptor", api.createTensor);
  resolve("cudnnDestroyTensorDescriptor", api.destroyTensor);
  resolve("cudnnSetTensorNdDescriptor", api.setTensor);
  resolve("cudnnCreateFilterDescriptor", api.createFilter);
  resolve("cudnnDestroyFilterDescriptor", api.destroyFilter);
  resolve("cudnnSetFilterNdDescriptor", api.setFilter);
  resolve("cudnnCreateConvolutionDescriptor", api.createConv);
  resolve("cudnnDestroyConvolutionDescriptor", api.destroyConv);
  resolve("cudnnSetConvolution2dDescriptor", api.setConv);
  resolve("cudnnSetConvolutionGroupCount", api.setGroups);
  resolve("cudnnSetConvolutionMathType", api.setMath);
  resolve("cudnnTransformTensor", api.transform);
  resolve("cudnnGetConvolutionForwardAlgorithmMaxCount", api.fwdCount);
  resolve("cudnnGetConvolutionForwardAlgorithm_v7", api.fwdGet);
  resolve("cudnnFindConvolutionForwardAlgorithmEx", api.fwdFind);
  resolve("cudnnGetConvolutionForwardWorkspaceSize", api.fwdWorkspace);
  resolve("cudnnConvolutionForward", api.fwd);
  resolve("cudnnGetConvolutionBackwardDataAlgorithmMaxCount", api.dataCount);
  resolve("cudnnGetConvolutionBackwardDataAlgorithm_v7", api.dataGet);
  resolve("cudnnFindConvolutionBackwardDataAlgorithmEx", api.dataFind);
  resolve("cudnnGetConvolutionBackwardDataWorkspaceSize", api.dataWorkspace);
  resolve("cudnnConvolutionBackwardData", api.data);
  resolve("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", api.filterCount);
  resolve("cudnnGetConvolutionBackwardFilterAlgorithm_v7", api.filterGet);
  resolve("cudnnFindConvolutionBackwardFilterAlgorithmEx", api.filterFind);
  resolve("cudnnGetConvolutionBackwardFilterWorkspaceSize", api.filterWorkspace);
  resolve("cudnnConvolutionBackwardFilter", api.filter);
  if (!api.error.empty()) {
    api.error = fmt::format("cuDNN at {} is unusable: {}", library.name(), api.error);
    return api;
  }
  const size_t raw = api.getVersion();
  if (raw < 90000) {
    api.error = fmt::format("cuDNN at {} is {}, kiln needs cuDNN 9", library.name(),
                            formatVersion(Library::cudnn, static_cast<int64_t>(raw)));
    return api;
  }
  api.version = "cuDNN " + formatVersion(Library::cudnn, static_cast<int64_t>(raw));
  return api;
}

const CudnnApi& cudnn() {
  static const CudnnApi* const api = new CudnnApi(loadApi(libraryCandidates(Library::cudnn)));  // leaked, as handles
  return *api;
}

std::string statusText(cudnnStatus_t status) {
  const char* name = cudnn().errorString ? cudnn().errorString(status) : nullptr;
  return name ? std::string(name) : fmt::format("cudnnStatus_t {}", static_cast<int>(status));
}

/// Throws kiln::Error naming the op, the cuDNN call and the shapes.
void check(cudnnStatus_t s, const char* what, const ConvCall& c, Device device) {
  if (s != CUDNN_STATUS_SUCCESS) [[unlikely]]
    fail("{} on {}: {} failed: {} ({})", c.opName(), device.str(), what, statusText(s), c.str());
}

/// The calling thread's handle for cuda:`index` (whose context is current).
cudnnHandle_t handleFor(int index) {
  thread_local std::vector<std::pair<int, cudnnHandle_t>> held;  // never destroyed: see the Note
  for (const auto& [device, handle] : held)
    if (device == index) return handle;
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t s = cudnn().create(&handle);
  KILN_CHECK(s == CUDNN_STATUS_SUCCESS, "cuda:{}: cudnnCreate failed: {}", index, statusText(s));
  held.emplace_back(index, handle);
  return handle;
}

cudnnDataType_t dataType(DType t) {
  switch (t) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::i32:
    case DType::i64:
    case DType::boolean: break;
  }
  KILN_ASSERT(false, "cuDNN data type of {}", dtypeName(t));
}

/// The descriptors of one call, destroyed with it.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~Descriptors() {
    const CudnnApi& api = cudnn();
    if (x) api.destroyTensor(x);
    if (y) api.destroyTensor(y);
    if (w) api.destroyFilter(w);
    if (conv) api.destroyConv(conv);
  }
};

/// A tensor descriptor for `t` of `type`, owned by the caller.
cudnnTensorDescriptor_t makeTensor(const detail::DnnTensor& t, DType type, const ConvCall& c, Device device) {
  cudnnTensorDescriptor_t d = nullptr;
  check(cudnn().createTensor(&d), "cudnnCreateTensorDescriptor", c, device);
  const cudnnStatus_t s = cudnn().setTensor(d, dataType(type), 4, t.dims.data(), t.strides.data());
  if (s != CUDNN_STATUS_SUCCESS) cudnn().destroyTensor(d);
  check(s, "cudnnSetTensorNdDescriptor", c, device);
  return d;
}

void describe(Descriptors& d, const detail::DnnConvPlan& p, const ConvCall& c, Device device) {
  const CudnnApi& api = cudnn();
  d.x = makeTensor(p.x, p.dtype, c, device);
  d.y = makeTensor(p.y, p.dtype, c, device);
  check(api.createFilter(&d.w), "cudnnCreateFilterDescriptor", c, device);
  check(api.setFilter(d.w, dataType(p.dtype), CUDNN_TENSOR_NCHW, 4, p.w.data()), "cudnnSetFilterNdDescriptor", c,
        device);
  check(api.createConv(&d.conv), "cudnnCreateConvolutionDescriptor", c, device);
  check(api.setConv(d.conv, p.padH, p.padW, p.strideH, p.strideW, p.dilationH, p.dilationW, CUDNN_CROSS_CORRELATION,
                    dataType(p.computeType)),
        "cudnnSetConvolution2dDescriptor", c, device);
  check(api.setGroups(d.conv, p.groups), "cudnnSetConvolutionGroupCount", c, device);
  check(api.setMath(d.conv, p.tensorOps ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "cudnnSetConvolutionMathType", c,
        device);
}

/// Memory for the length of a call, allocated for the call's stream from
/// kiln's caching allocator and given back after the work enqueued on it
/// (Note [Memory belongs to a stream]: later work on that stream runs after
/// the cuDNN kernels that use it).
class Scratch {
 public:
  Scratch(DeviceInterface& driver, size_t bytes, StreamHandle stream)
      : driver_(driver), ptr_(driver.allocate(bytes, stream)) {}
  ~Scratch() { driver_.free(ptr_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* address() const { return reinterpret_cast<void*>(pointerOf(ptr_)); }
  DevicePtr ptr() const { return ptr_; }

 private:
  DeviceInterface& driver_;
  DevicePtr ptr_;
};

/// An algorithm and the math it runs with.
struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

std::mutex& choiceMutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::map<std::string, Choice>& choices() {
  static auto* m = new std::map<std::string, Choice>();
  return *m;
}

/// The first usable result (detail::firstUsableCandidate).
template <typename Perf>
std::optional<Choice> firstUsable(const std::vector<Perf>& perfs, int count, const detail::DnnConvPlan& p,
                                  bool deterministicOnly) {
  std::vector<detail::DnnCandidate> candidates;
  for (int i = 0; i < count && i < static_cast<int>(perfs.size()); ++i) {
    const Perf& r = perfs[static_cast<size_t>(i)];
    candidates.push_back({static_cast<int>(r.algo), r.status == CUDNN_STATUS_SUCCESS,
                          r.determinism == CUDNN_DETERMINISTIC,
                          r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION});
  }
  const std::optional<size_t> i = detail::firstUsableCandidate(candidates, p.tensorOps, deterministicOnly);
  if (!i) return std::nullopt;
  return Choice{candidates[*i].algo, perfs[*i].mathType};
}

/// The three kinds' calls, one shape.
struct KindApi {
  const char* get;
  const char* find;
  const char* run;
};

KindApi kindApi(ConvCall::Kind kind) {
  switch (kind) {
    case ConvCall::Kind::forward:
      return {"cudnnGetConvolutionForwardAlgorithm_v7", "cudnnFindConvolutionForwardAlgorithmEx",
              "cudnnConvolutionForward"};
    case ConvCall::Kind::transpose:
      return {"cudnnGetConvolutionBackwardDataAlgorithm_v7", "cudnnFindConvolutionBackwardDataAlgorithmEx",
              "cudnnConvolutionBackwardData"};
    case ConvCall::Kind::weightGrad:
      return {"cudnnGetConvolutionBackwardFilterAlgorithm_v7", "cudnnFindConvolutionBackwardFilterAlgorithmEx",
              "cudnnConvolutionBackwardFilter"};
  }
  return {"", "", ""};
}

/// The operands' device addresses as cuDNN's calls take them.
struct Operands {
  void *x = nullptr, *w = nullptr, *y = nullptr;
};

// Note [Choosing a cuDNN algorithm]
// As the CPU's (Note [Choosing a convolution algorithm] in
// runtime/conv.cpp): under runtime::deterministic(), the first algorithm
// cudnnGet*Algorithm_v7's heuristics rank that cuDNN marks
// CUDNN_DETERMINISTIC (the benchmark setting is ignored); else, with
// setConvBenchmark(true), the fastest that cudnnFind*AlgorithmEx measures
// on the call's own buffers (its result is overwritten, then written
// again), with a workspace of at most the largest any heuristic candidate
// asks, up to 1 GiB, from kiln's allocator; else the heuristics' first. f32
// and f64 never take a tensor-op (TF32) algorithm. Choices are kept per
// process, keyed by the device, the mode and the encoded call.
Choice chooseAlgorithm(cudnnHandle_t handle, const Descriptors& d, const detail::DnnConvPlan& p, const ConvCall& c,
                       Device device, DeviceInterface& driver, StreamHandle stream, const Operands& o) {
  const detail::DnnChoiceMode mode = detail::dnnChoiceMode(deterministic(), convBenchmark());
  const bool det = mode == detail::DnnChoiceMode::deterministic, find = mode == detail::DnnChoiceMode::benchmark;
  std::string key = fmt::format("{}|{}|", device.index(), static_cast<int>(mode));
  for (int64_t a : c.encode()) key += fmt::format("{},", a);
  {
    std::lock_guard lock(choiceMutex());
    if (auto it = choices().find(key); it != choices().end()) return it->second;
  }
  const CudnnApi& api = cudnn();
  const KindApi names = kindApi(c.kind);
  auto decide = [&](auto count, auto get, auto findEx, auto perfType) -> Choice {
    using Perf = decltype(perfType);
    int max = 0;
    check(count(handle, &max), "cudnnGet*AlgorithmMaxCount", c, device);
    std::vector<Perf> perfs(static_cast<size_t>(std::max(max, 1)));
    int returned = 0;
    check(get(&returned, perfs.data(), max), names.get, c, device);
    std::optional<Choice> chosen = firstUsable(perfs, returned, p, det);
    if (find) {
      size_t bytes = 0;
      for (int i = 0; i < returned; ++i)
        if (perfs[static_cast<size_t>(i)].status == CUDNN_STATUS_SUCCESS)
          bytes = std::max(bytes, perfs[static_cast<size_t>(i)].memory);
      bytes = std::min<size_t>(bytes, size_t{1} << 30);
      Scratch workspace(driver, bytes, stream);
      std::vector<Perf> measured(static_cast<size_t>(std::max(max, 1)));
      int found = 0;
      check(findEx(&found, measured.data(), max, workspace.address(), bytes), names.find, c, device);
      if (std::optional<Choice> fastest = firstUsable(measured, found, p, false)) chosen = fastest;
    }
    KILN_CHECK(chosen.has_value(), "{} on {}: cuDNN offers no {}algorithm ({})", c.opName(), device.str(),
               det            ? "deterministic "
               : !p.tensorOps ? "non-TF32 "
                              : "",
               c.str());
    return *chosen;
  };
  Choice choice;
  switch (c.kind) {
    case ConvCall::Kind::forward:
      choice = decide(
          api.fwdCount,
          [&](int* n, FwdPerf* r, int max) { return api.fwdGet(handle, d.x, d.w, d.conv, d.y, max, n, r); },
          [&](int* n, FwdPerf* r, int max, void* ws, size_t bytes) {
            return api.fwdFind(handle, d.x, o.x, d.w, o.w, d.conv, d.y, o.y, max, n, r, ws, bytes);
          },
          FwdPerf{});
      break;
    case ConvCall::Kind::transpose:
      choice = decide(
          api.dataCount,
          [&](int* n, DataPerf* r, int max) { return api.dataGet(handle, d.w, d.y, d.conv, d.x, max, n, r); },
          [&](int* n, DataPerf* r, int max, void* ws, size_t bytes) {
            return api.dataFind(handle, d.w, o.w, d.y, o.y, d.conv, d.x, o.x, max, n, r, ws, bytes);
          },
          DataPerf{});
      break;
    case ConvCall::Kind::weightGrad:
      choice = decide(
          api.filterCount,
          [&](int* n, FilterPerf* r, int max) { return api.filterGet(handle, d.x, d.y, d.conv, d.w, max, n, r); },
          [&](int* n, FilterPerf* r, int max, void* ws, size_t bytes) {
            return api.filterFind(handle, d.x, o.x, d.y, o.y, d.conv, d.w, o.w, max, n, r, ws, bytes);
          },
          FilterPerf{});
      break;
  }
  std::lock_guard lock(choiceMutex());
  choices().emplace(key, choice);
  return choice;
}

/// dst (dstDesc) = src (srcDesc): the strided copies of the plan.
void transform(cudnnHandle_t handle, const detail::DnnConvPlan& p, const detail::DnnTensor& from, const void* src,
               const detail::DnnTensor& to, void* dst, const ConvCall& c, Device device) {
  cudnnTensorDescriptor_t a = makeTensor(from, p.dtype, c, device);
  cudnnTensorDescriptor_t b = nullptr;
  try {
    b = makeTensor(to, p.dtype, c, device);
  } catch (...) {
    cudnn().destroyTensor(a);
    throw;
  }
  const double oneD = 1, zeroD = 0;
  const float oneF = 1, zeroF = 0;
  const bool f64 = p.dtype == DType::f64;
  const cudnnStatus_t s = cudnn().transform(handle, f64 ? static_cast<const void*>(&oneD) : &oneF, a, src,
                                            f64 ? static_cast<const void*>(&zeroD) : &zeroF, b, dst);
  cudnn().destroyTensor(a);
  cudnn().destroyTensor(b);
  check(s, "cudnnTransformTensor", c, device);
}

void* offsetBy(void* base, int64_t elements, DType t) { return static_cast<char*>(base) + elements * itemSize(t); }

}  // namespace

namespace detail {

CudnnLoad loadCudnn(std::span<const std::string> candidates) {
  const CudnnApi api = loadApi(candidates);
  return {api.library, api.version, api.entryPoints, api.error};
}

void forgetDnnChoices() {
  std::lock_guard lock(choiceMutex());
  choices().clear();
}

}  // namespace detail

bool dnnAvailable(std::string* why) {
  if (why) *why = cudnn().error;
  return cudnn().error.empty();
}

std::string dnnVersion() {
  const CudnnApi& api = cudnn();
  return api.error.empty() ? fmt::format("{} ({})", api.version, api.library) : "cuDNN unavailable";
}

void conv(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 3, "conv call with {} buffers", call.buffers.size());
  const ConvCall c = ConvCall::decode(call.args);
  const detail::DnnConvPlan p = detail::planDnnConv(c);
  if (p.empty) return;
  DeviceInterface& driver = deviceInterface(call.device);  // says why the device cannot be used
  const size_t resultBytes = static_cast<size_t>(p.resultElements * itemSize(c.dtype));
  const DevicePtr result = call.buffers[2];
  const uint64_t zero = 0;
  if (p.zeroFill) {
    driver.fill(result, resultBytes, &zero, static_cast<size_t>(itemSize(c.dtype)), call.stream);
    return;
  }
  const CudnnApi& api = cudnn();
  KILN_CHECK(api.error.empty(), "{}: cannot run on {}: {}", c.opName(), call.device.str(), api.error);
  KILN_ASSERT(call.device.isCuda(), "cuDNN convolution on {}", call.device.str());
  makeCurrent(call.device.index());
  cudnnHandle_t handle = handleFor(call.device.index());
  check(api.setStream(handle, streamOf(call.device.index(), call.stream)), "cudnnSetStream", c, call.device);

  Operands o;
  o.x = reinterpret_cast<void*>(pointerOf(call.buffers[static_cast<size_t>(p.xBuffer)]));
  o.w = reinterpret_cast<void*>(pointerOf(call.buffers[static_cast<size_t>(p.wBuffer)]));
  o.y = reinterpret_cast<void*>(pointerOf(call.buffers[static_cast<size_t>(p.yBuffer)]));
  const int64_t item = itemSize(c.dtype);
  std::unique_ptr<Scratch> wPacked, xPadded;
  if (p.copyW) {
    const detail::DnnTensor packedW{p.w, {p.w[1] * p.w[2] * p.w[3], p.w[2] * p.w[3], p.w[3], 1}};
    const int64_t elements = int64_t{p.w[0]} * p.w[1] * p.w[2] * p.w[3];
    wPacked = std::make_unique<Scratch>(driver, static_cast<size_t>(elements * item), call.stream);
    transform(handle, p, p.wRead, o.w, packedW, wPacked->address(), c, call.device);
    o.w = wPacked->address();
  }
  void* const callX = o.x;
  if (p.explicitPadding) {  // Note [Asymmetric padding on cuDNN]
    const int64_t elements = int64_t{p.x.dims[0]} * p.x.dims[1] * p.x.dims[2] * p.x.dims[3];
    xPadded = std::make_unique<Scratch>(driver, static_cast<size_t>(elements * item), call.stream);
    o.x = xPadded->address();
    if (c.kind != ConvCall::Kind::transpose) {
      driver.fill(xPadded->ptr(), static_cast<size_t>(elements * item), &zero, static_cast<size_t>(item), call.stream);
      transform(handle, p, p.xInside, offsetBy(callX, p.xInsideCallOffset, c.dtype), {p.xInside.dims, p.x.strides},
                offsetBy(o.x, p.xInsideOffset, c.dtype), c, call.device);
    }
  }
  Descriptors d;
  describe(d, p, c, call.device);
  const Choice choice = chooseAlgorithm(handle, d, p, c, call.device, driver, call.stream, o);
  // f32 and f64 stay on FMA math whatever the query said (no TF32).
  check(api.setMath(d.conv, p.tensorOps ? choice.math : CUDNN_FMA_MATH), "cudnnSetConvolutionMathType", c, call.device);
  size_t bytes = 0;
  switch (c.kind) {
    case ConvCall::Kind::forward:
      check(
          api.fwdWorkspace(handle, d.x, d.w, d.conv, d.y, static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), &bytes),
          "cudnnGetConvolutionForwardWorkspaceSize", c, call.device);
      break;
    case ConvCall::Kind::transpose:
      check(api.dataWorkspace(handle, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo),
                              &bytes),
            "cudnnGetConvolutionBackwardDataWorkspaceSize", c, call.device);
      break;
    case ConvCall::Kind::weightGrad:
      check(api.filterWorkspace(handle, d.x, d.y, d.conv, d.w,
                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo), &bytes),
            "cudnnGetConvolutionBackwardFilterWorkspaceSize", c, call.device);
      break;
  }
  Scratch workspace(driver, bytes, call.stream);
  const double oneD = 1, zeroD = 0;
  const float oneF = 1, zeroF = 0;
  const bool f64 = c.dtype == DType::f64;
  const void* alpha = f64 ? static_cast<const void*>(&oneD) : &oneF;
  const void* beta = f64 ? static_cast<const void*>(&zeroD) : &zeroF;
  const KindApi names = kindApi(c.kind);
  switch (c.kind) {
    case ConvCall::Kind::forward:
      check(api.fwd(handle, alpha, d.x, o.x, d.w, o.w, d.conv, static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo),
                    workspace.address(), bytes, beta, d.y, o.y),
            names.run, c, call.device);
      break;
    case ConvCall::Kind::transpose:
      check(api.data(handle, alpha, d.w, o.w, d.y, o.y, d.conv, static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo),
                     workspace.address(), bytes, beta, d.x, o.x),
            names.run, c, call.device);
      break;
    case ConvCall::Kind::weightGrad:
      check(api.filter(handle, alpha, d.x, o.x, d.y, o.y, d.conv,
                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo), workspace.address(), bytes, beta, d.w,
                       o.w),
            names.run, c, call.device);
      break;
  }
  if (p.explicitPadding && c.kind == ConvCall::Kind::transpose) {
    // The gradient of the window's inside is x's; rows never read get 0.
    driver.fill(result, resultBytes, &zero, static_cast<size_t>(item), call.stream);
    transform(handle, p, {p.xInside.dims, p.x.strides}, offsetBy(o.x, p.xInsideOffset, c.dtype), p.xInside,
              offsetBy(callX, p.xInsideCallOffset, c.dtype), c, call.device);
  }
}

#else  // !KILN_HAVE_CUDNN

namespace {
constexpr const char* kNoToolkit = "kiln was built without the CUDA toolkit's cuDNN headers (no cudnn.h)";
}

namespace detail {
CudnnLoad loadCudnn(std::span<const std::string>) { return {{}, {}, {}, kNoToolkit}; }
void forgetDnnChoices() {}
}  // namespace detail

bool dnnAvailable(std::string* why) {
  if (why) *why = kNoToolkit;
  return false;
}

std::string dnnVersion() { return "cuDNN unavailable"; }

void conv(const LibraryCall& call) {
  const ConvCall c = ConvCall::decode(call.args);
  const detail::DnnConvPlan p = detail::planDnnConv(c);
  if (p.empty) return;
  fail("{}: cannot run on {}: {}", c.opName(), call.device.str(), kNoToolkit);
}

#endif

}  // namespace kiln::runtime::cuda
