// kiln's own OpenCL kernels behind the library calls (runtime/opencl_library.h):
// the strided copy ("gather") that makes a view contiguous, index_select,
// index_add and the one hand-written GEMM (runtime/opencl_matmul.cpp says
// why it exists), in the core program; the three direct convolutions
// (runtime/opencl_conv.cpp) in the conv program. Each program is built once
// per process and device, at the first launch of one of its kernels, from
// the source in runtime/opencl_kernels.cpp (the conv kernels' in
// runtime/opencl_conv_kernels.cpp), so that a process that never convolves
// never compiles them; each kernel is made on first use and launched under
// its own mutex. Included only where KILN_HAVE_OPENCL is set.
//
// Every kernel takes its buffers and then one struct of 64-bit integers by
// value (sizes, strides and element offsets: a cl_mem cannot be offset on
// the host, Note [Device memory is opaque]), runs one work-item per output
// element (index_add: per output column, see there) in work-groups of
// kLocalSize, and returns early past the end: none has a barrier, so PoCL's
// rule against barriers in divergent code holds. (The conv kernels compute
// a tile of channels times 4 columns per work-item:
// runtime/opencl_conv_kernels.cpp.)
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/opencl_context.h"

namespace kiln::runtime::opencl {

/// How many dims the kernels walk; callers merge dims first (mergeDims).
inline constexpr int kMaxDims = 16;
/// The one work-group size of every kernel (reqd_work_group_size), so PoCL
/// compiles each kernel once.
inline constexpr int64_t kLocalSize = 64;

// The argument structs, field for field as the kernels declare them.
struct GatherArgs {
  int64_t numel = 0, srcOffset = 0, dstOffset = 0, rank = 0;
  int64_t sizes[kMaxDims] = {}, strides[kMaxDims] = {};
};
struct SelectArgs {
  int64_t numel = 0, xOffset = 0, indexOffset = 0, outOffset = 0, indexStride = 0, dim = 0, rank = 0;
  int64_t sizes[kMaxDims] = {}, strides[kMaxDims] = {};  ///< out's sizes, x's strides
};
struct AddArgs {
  int64_t columns = 0, outOffset = 0, indexOffset = 0, sourceOffset = 0, indexStride = 0, dim = 0, numIndices = 0,
          rank = 0;
  int64_t sizes[kMaxDims] = {}, outStrides[kMaxDims] = {}, sourceStrides[kMaxDims] = {};  ///< out's sizes
};
struct GemmArgs {
  int64_t total = 0, m = 0, n = 0, k = 0, aOffset = 0, bOffset = 0, cOffset = 0;
  int64_t aRowStride = 0, aColStride = 0, bRowStride = 0, bColStride = 0, rank = 0;
  int64_t batch[kMaxDims] = {}, aBatch[kMaxDims] = {}, bBatch[kMaxDims] = {};
};

/// The conv kernels' (runtime/opencl_conv_kernels.cpp declares them as
/// well): runtime/conv.h's ConvCall sizes and parameters, the element
/// offsets of the three buffers in the kind's order, and the strides of x,
/// w and y (the written one's contiguous).
struct ConvArgs {
  int64_t total = 0, offsets[3] = {};
  int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0, ho = 0, wo = 0;
  int64_t strideH = 0, strideW = 0, padTop = 0, padLeft = 0, dilationH = 0, dilationW = 0, groups = 0;
  int64_t xStrides[4] = {}, wStrides[4] = {}, yStrides[4] = {};
};

/// The programs the kernels are in (see the top of this file).
enum class KernelProgram { core, conv };

/// Enqueues kernel `name` of device `index`'s `program` on `queue` over
/// `items` work-items (rounded up to whole work-groups), with `buffers` as
/// its first arguments and `args` (`argsBytes` bytes) as its last.
void launchKernel(int index, cl_command_queue queue, const std::string& name, std::initializer_list<cl_mem> buffers,
                  const void* args, size_t argsBytes, int64_t items, KernelProgram program = KernelProgram::core);

template <typename Args>
void launchKernel(int index, cl_command_queue queue, const std::string& name, std::initializer_list<cl_mem> buffers,
                  const Args& args, int64_t items, KernelProgram program = KernelProgram::core) {
  launchKernel(index, queue, name, buffers, &args, sizeof args, items, program);
}

/// `text` with each key replaced by its value, in order (so a key that is a
/// prefix of another comes after it: "$IN" before "$I").
std::string instantiate(std::string text, const std::vector<std::pair<std::string, std::string>>& values);

/// The conv program's kernels, without the prelude every program starts
/// with (runtime/opencl_conv_kernels.cpp).
std::string convKernelSource();

/// The kernel-name suffix of a dtype ("f32") and of an element moved as
/// bits ("u8", "u16", "u32", "u64").
std::string kernelSuffix(DType dtype);
std::string bitsSuffix(int64_t itemBytes);

/// Dims with sizes `sizes`, read through each of `strides`, merged where
/// every stride list lets two neighbours be walked as one, and size-1 dims
/// dropped; `keep` (or -1) is a dim that neither merges nor drops, and
/// comes back as the new position of that dim.
void mergeDims(std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>*> strides, int64_t& keep);

/// Enqueues the copy of the (sizes, strides) view of `src`, starting
/// `srcOffset` elements in, to contiguous `dst`, `dstOffset` elements in
/// (nothing when that is a contiguous view onto itself).
void enqueueGather(int index, cl_command_queue queue, int64_t itemBytes, cl_mem src, int64_t srcOffset,
                   std::vector<int64_t> sizes, std::vector<int64_t> strides, cl_mem dst, int64_t dstOffset);

/// The element offset of a DevicePtr: its byte offset in whole elements.
int64_t elementOffset(const char* op, DevicePtr ptr, int64_t itemBytes);

}  // namespace kiln::runtime::opencl
