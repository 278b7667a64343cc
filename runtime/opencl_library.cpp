// index_select and index_add on OpenCL devices (runtime/opencl_library.h):
// the CPU's calls (runtime/indexing.h) as kiln's own kernels
// (runtime/opencl_kernels.cpp), enqueued on the call's stream. matmul is in
// runtime/opencl_matmul.cpp.
//
// Note [OpenCL index checks read the index]
// The CPU checks every index before it writes anything and throws
// `index_select: index 7 is out of range for dimension 0 of size 5`; only
// the data can tell, and a kernel cannot throw. So both calls read the index
// tensor back to the host first: a blocking read on the call's stream
// (copyDeviceToHost), which waits for the work enqueued there before it (the
// index is often computed on the device) and is the one place these calls
// make the host wait. The indices are then checked with the CPU's message
// and, only when all are in range, the kernels are enqueued without
// blocking; on an error nothing has been enqueued, so the output is
// untouched. The kernels read the index on the device, through its stride.
#include "runtime/opencl_library.h"

#include "runtime/error.h"

#if KILN_HAVE_OPENCL
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/indexing.h"
#include "runtime/opencl_kernels.h"
#endif

namespace kiln::runtime::opencl {

#if KILN_HAVE_OPENCL

namespace {

/// Reads the index back and checks it (Note [OpenCL index checks read the index]).
void checkIndices(const char* op, const LibraryCall& call, DevicePtr index, const IndexCall& c) {
  if (c.numIndices == 0) return;
  KILN_ASSERT(c.indexDType == DType::i32 || c.indexDType == DType::i64, "{} with an index of {}", op,
              dtypeName(c.indexDType));
  const int64_t item = itemSize(c.indexDType);
  const int64_t span = (c.numIndices - 1) * c.indexStride + 1;  // elements from the first index to the last
  std::vector<char> host(static_cast<size_t>(span * item));
  deviceInterface(call.device).copyDeviceToHost(host.data(), index, host.size(), call.stream);
  const int64_t size = c.sizes[static_cast<size_t>(c.dim)];
  for (int64_t j = 0; j < c.numIndices; ++j) {
    int64_t i = 0;
    if (c.indexDType == DType::i32) {
      int32_t v = 0;
      std::memcpy(&v, host.data() + j * c.indexStride * item, sizeof v);
      i = v;
    } else {
      std::memcpy(&i, host.data() + j * c.indexStride * item, sizeof i);
    }
    KILN_CHECK(i >= 0 && i < size, "{}: index {} is out of range for dimension {} of size {}", op, i, c.dim, size);
  }
}

int64_t product(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t size : sizes) n *= size;
  return n;
}

/// Row-major strides of `sizes`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d];
  }
  return strides;
}

std::string indexSuffix(DType indexDType) { return indexDType == DType::i32 ? "i32" : "i64"; }

}  // namespace

void indexSelect(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 3, "index_select call with {} buffers", call.buffers.size());
  const IndexCall c = IndexCall::decode(call.args);
  const DevicePtr x = call.buffers[0], index = call.buffers[1], out = call.buffers[2];
  checkIndices("index_select", call, index, c);
  // The output's sizes: x's with the index count at dim.
  std::vector<int64_t> sizes = c.sizes, strides = c.strides;
  sizes[static_cast<size_t>(c.dim)] = c.numIndices;
  const int64_t numel = product(sizes);
  if (numel == 0) return;
  int64_t dim = c.dim;
  mergeDims(sizes, {&strides}, dim);  // out is contiguous: only x's strides decide
  KILN_CHECK(sizes.size() <= static_cast<size_t>(kMaxDims),
             "index_select: x has {} dims that do not merge; the OpenCL kernel walks up to {}", sizes.size(), kMaxDims);
  const int64_t item = itemSize(c.dtype);
  SelectArgs args;
  args.numel = numel;
  args.xOffset = elementOffset("index_select", x, item);
  args.indexOffset = elementOffset("index_select", index, itemSize(c.indexDType));
  args.outOffset = elementOffset("index_select", out, item);
  args.indexStride = c.indexStride, args.dim = dim, args.rank = static_cast<int64_t>(sizes.size());
  std::copy(sizes.begin(), sizes.end(), args.sizes);
  std::copy(strides.begin(), strides.end(), args.strides);
  const int device = call.device.index();
  launchKernel(device, queueOf(device, call.stream),
               "kiln_index_select_" + bitsSuffix(item) + "_" + indexSuffix(c.indexDType),
               {memOf(x), memOf(index), memOf(out)}, args, numel);
}

void indexAdd(const LibraryCall& call) {
  KILN_ASSERT(call.buffers.size() == 4, "index_add call with {} buffers", call.buffers.size());
  const IndexCall c = IndexCall::decode(call.args);
  KILN_ASSERT(!c.sourceStrides.empty(), "index_add call without source strides");
  KILN_ASSERT(c.dtype != DType::boolean, "index_add of {} reached the runtime", dtypeName(c.dtype));
  const DevicePtr x = call.buffers[0], index = call.buffers[1], source = call.buffers[2], out = call.buffers[3];
  checkIndices("index_add", call, index, c);
  const int64_t numel = product(c.sizes);
  if (numel == 0) return;
  const int device = call.device.index();
  cl_command_queue queue = queueOf(device, call.stream);
  const int64_t item = itemSize(c.dtype);
  const int64_t outOffset = elementOffset("index_add", out, item);

  // Dims merge where source's strides let them (out is contiguous); out's
  // strides are those of the merged sizes.
  std::vector<int64_t> sizes = c.sizes, sourceStrides = c.sourceStrides;
  int64_t dim = c.dim;
  mergeDims(sizes, {&sourceStrides}, dim);
  KILN_CHECK(sizes.size() <= static_cast<size_t>(kMaxDims),
             "index_add: source has {} dims that do not merge; the OpenCL kernel walks up to {}", sizes.size(),
             kMaxDims);

  // out = x (nothing to copy when out is a contiguous x already).
  enqueueGather(device, queue, item, memOf(x), elementOffset("index_add", x, item), c.sizes, c.strides, memOf(out),
                outOffset);
  if (c.numIndices == 0) return;
  const std::vector<int64_t> outStrides = contiguousStrides(sizes);
  AddArgs args;
  args.columns = numel / sizes[static_cast<size_t>(dim)];
  args.outOffset = outOffset;
  args.indexOffset = elementOffset("index_add", index, itemSize(c.indexDType));
  args.sourceOffset = elementOffset("index_add", source, item);
  args.indexStride = c.indexStride, args.dim = dim, args.numIndices = c.numIndices;
  args.rank = static_cast<int64_t>(sizes.size());
  std::copy(sizes.begin(), sizes.end(), args.sizes);
  std::copy(outStrides.begin(), outStrides.end(), args.outStrides);
  std::copy(sourceStrides.begin(), sourceStrides.end(), args.sourceStrides);
  launchKernel(device, queue, "kiln_index_add_" + kernelSuffix(c.dtype) + "_" + indexSuffix(c.indexDType),
               {memOf(source), memOf(index), memOf(out)}, args, args.columns);
}

#else  // !KILN_HAVE_OPENCL

void indexSelect(const LibraryCall& call) {
  fail("index_select: {}: kiln was built without OpenCL (Debian ocl-icd-opencl-dev)", call.device.str());
}
void indexAdd(const LibraryCall& call) {
  fail("index_add: {}: kiln was built without OpenCL (Debian ocl-icd-opencl-dev)", call.device.str());
}

#endif

}  // namespace kiln::runtime::opencl
