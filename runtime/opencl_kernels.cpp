// kiln's own OpenCL kernels behind the library calls (runtime/opencl_kernels.h):
// their OpenCL C source, the program each device builds of it once, and
// their launches.
//
// f16 and bf16 are stored as their 16 bits (ushort: PoCL has no
// cl_khr_fp16) and converted with the same bit formulas as kiln's
// generated kernels (ir/scalar_formulas_bits.h; codegen/c_builder.h renders
// them for the OpenCL dialect): widened exactly to f32, computed in f32,
// rounded to nearest even and narrowed back. Written out here in OpenCL C
// because the runtime renders nothing; the unit tests check them against
// the CPU's Half and BFloat16 (runtime/numeric.h) bit for bit.
#if KILN_HAVE_OPENCL
#include "runtime/opencl_kernels.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "runtime/error.h"

namespace kiln::runtime::opencl {

namespace {

// --- the source ---

// What every kernel shares: the argument structs (runtime/opencl_kernels.h
// mirrors them), the f16/bf16 conversions, and per dtype how an element is
// loaded into the type it is computed in, stored back, and added.
constexpr const char* kPrelude = R"CL(
#pragma OPENCL FP_CONTRACT OFF
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#define KILN_MAX_DIMS 16
#define KILN_KERNEL __kernel __attribute__((reqd_work_group_size(64, 1, 1))) void

typedef struct {
  long numel, srcOffset, dstOffset, rank;
  long sizes[KILN_MAX_DIMS], strides[KILN_MAX_DIMS];
} GatherArgs;
typedef struct {
  long numel, xOffset, indexOffset, outOffset, indexStride, dim, rank;
  long sizes[KILN_MAX_DIMS], strides[KILN_MAX_DIMS];
} SelectArgs;
typedef struct {
  long columns, outOffset, indexOffset, sourceOffset, indexStride, dim, numIndices, rank;
  long sizes[KILN_MAX_DIMS], outStrides[KILN_MAX_DIMS], sourceStrides[KILN_MAX_DIMS];
} AddArgs;
typedef struct {
  long total, m, n, k, aOffset, bOffset, cOffset;
  long aRowStride, aColStride, bRowStride, bColStride, rank;
  long batch[KILN_MAX_DIMS], aBatch[KILN_MAX_DIMS], bBatch[KILN_MAX_DIMS];
} GemmArgs;

/* ir/scalar_formulas_bits.h, step for step (uint arithmetic wraps as the
   formulas' i32 does; every compare there is of values in [0, 2^31)). */
static inline float kiln_widen_f16(uint h) {
  uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu;
  uint m = h & 0x3ffu;
  uint normal = sign | (((h & 0x7fffu) << 13) + 0x38000000u);
  uint special = sign | 0x7f800000u | (m << 13);
  uint sub = as_uint((float)m * 5.9604644775390625e-8f) | sign;
  uint r = e == 0x1fu ? special : normal;
  return as_float(e == 0u ? sub : r);
}
static inline float kiln_round_f16(float x) {
  uint u = as_uint(x);
  uint sign = u & 0x80000000u;
  uint a = u & 0x7fffffffu;
  uint up = a + 0xfffu + ((a >> 13) & 1u);
  uint normal = (up & 0xffffe000u) | sign;
  uint sub = as_uint((as_float(a) + 0.5f) - 0.5f) | sign;
  uint inf = sign | 0x7f800000u;
  uint nan = (u | 0x00400000u) & 0xffffe000u;
  uint r = a < 0x38800000u ? sub : normal;
  r = a >= 0x477ff000u ? inf : r;
  return x != x ? as_float(nan) : as_float(r);
}
static inline ushort kiln_narrow_f16(float x) {
  uint u = as_uint(x);
  uint sign = (u >> 16) & 0x8000u;
  uint a = u & 0x7fffffffu;
  uint special = 0x7c00u | ((a >> 13) & 0x3ffu);
  uint normal = (a - 0x38000000u) >> 13;
  uint sub = (uint)convert_int_sat(as_float(a) * 16777216.0f);
  uint r = a < 0x38800000u ? sub : normal;
  r = a >= 0x7f800000u ? special : r;
  return (ushort)(r | sign);
}
static inline float kiln_widen_bf16(uint h) { return as_float(h << 16); }
static inline float kiln_round_bf16(float x) {
  uint u = as_uint(x);
  uint r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  uint nan = (u | 0x00400000u) & 0xffff0000u;
  return x != x ? as_float(nan) : as_float(r);
}
static inline ushort kiln_narrow_bf16(float x) { return (ushort)(as_uint(x) >> 16); }

/* Load: storage to the type a kernel computes in; store: back, rounding
   f16/bf16 once; add: one addition as kiln's `add` does it (f16/bf16 in f32
   then rounded, integers wrapping). */
static inline float kiln_load_f32(float x) { return x; }
static inline float kiln_store_f32(float x) { return x; }
static inline float kiln_load_f16(ushort x) { return kiln_widen_f16(x); }
static inline ushort kiln_store_f16(float x) { return kiln_narrow_f16(kiln_round_f16(x)); }
static inline float kiln_load_bf16(ushort x) { return kiln_widen_bf16(x); }
static inline ushort kiln_store_bf16(float x) { return kiln_narrow_bf16(kiln_round_bf16(x)); }
static inline uint kiln_load_i32(int x) { return as_uint(x); }
static inline int kiln_store_i32(uint x) { return as_int(x); }
static inline ulong kiln_load_i64(long x) { return as_ulong(x); }
static inline long kiln_store_i64(ulong x) { return as_long(x); }
#ifdef cl_khr_fp64
static inline double kiln_load_f64(double x) { return x; }
static inline double kiln_store_f64(double x) { return x; }
#endif
)CL";

// A strided view copied to contiguous memory, element by element as bits.
// $S: the bits type, $N: its name.
constexpr const char* kGather = R"CL(
KILN_KERNEL kiln_gather_$N(__global const $S* src, __global $S* dst, GatherArgs g) {
  const long e = (long)get_global_id(0);
  if (e >= g.numel) return;
  long rest = e, at = g.srcOffset;
  for (int d = (int)g.rank - 1; d >= 0; --d) {
    at += rest % g.sizes[d] * g.strides[d];
    rest /= g.sizes[d];
  }
  dst[g.dstOffset + e] = src[at];
}
)CL";

// out (contiguous) = x (strided) with index[c] for coordinate c along dim.
// $S, $N: the bits type and its name; $I, $IN: the index type and its name.
constexpr const char* kSelect = R"CL(
KILN_KERNEL kiln_index_select_$N_$IN(__global const $S* x, __global const $I* index, __global $S* out,
                                     SelectArgs g) {
  const long e = (long)get_global_id(0);
  if (e >= g.numel) return;
  long rest = e, at = g.xOffset;
  for (int d = (int)g.rank - 1; d >= 0; --d) {
    long c = rest % g.sizes[d];
    rest /= g.sizes[d];
    if (d == g.dim) c = (long)index[g.indexOffset + c * g.indexStride];
    at += c * g.strides[d];
  }
  out[g.outOffset + e] = x[at];
}
)CL";

// out[..., index[j], ...] += source[..., j, ...]: one work-item per column
// (a position in every dim but dim), walking j = 0, 1, ... in order, so
// that repeated indices add up in the CPU's order and no two work-items
// touch one element. $S, $N: the storage type and dtype name; $I, $IN: the
// index type and its name.
constexpr const char* kAdd = R"CL(
KILN_KERNEL kiln_index_add_$N_$IN(__global const $S* source, __global const $I* index, __global $S* out,
                                  AddArgs g) {
  const long e = (long)get_global_id(0);
  if (e >= g.columns) return;
  long rest = e, o = g.outOffset, s = g.sourceOffset;
  for (int d = (int)g.rank - 1; d >= 0; --d) {
    if (d == g.dim) continue;
    const long c = rest % g.sizes[d];
    rest /= g.sizes[d];
    o += c * g.outStrides[d];
    s += c * g.sourceStrides[d];
  }
  const long outStride = g.outStrides[g.dim], sourceStride = g.sourceStrides[g.dim];
  for (long j = 0; j < g.numIndices; ++j) {
    const long at = o + (long)index[g.indexOffset + j * g.indexStride] * outStride;
    out[at] = kiln_store_$N(kiln_load_$N(out[at]) + kiln_load_$N(source[s + j * sourceStride]));
  }
}
)CL";

// c[b..., i, j] = sum over k of a[b..., i, k] * b[b..., k, j], k in order,
// in the compute type $A of storage type $S (dtype $N); c contiguous.
constexpr const char* kGemm = R"CL(
KILN_KERNEL kiln_gemm_$N(__global const $S* a, __global const $S* b, __global $S* c, GemmArgs g) {
  const long e = (long)get_global_id(0);
  if (e >= g.total) return;
  const long j = e % g.n, row = e / g.n, i = row % g.m;
  long rest = row / g.m;
  long ao = g.aOffset + i * g.aRowStride, bo = g.bOffset + j * g.bColStride;
  for (int d = (int)g.rank - 1; d >= 0; --d) {
    const long at = rest % g.batch[d];
    rest /= g.batch[d];
    ao += at * g.aBatch[d];
    bo += at * g.bBatch[d];
  }
  $A acc = ($A)0;
  for (long kk = 0; kk < g.k; ++kk)
    acc += kiln_load_$N(a[ao + kk * g.aColStride]) * kiln_load_$N(b[bo + kk * g.bRowStride]);
  c[g.cOffset + e] = kiln_store_$N(acc);
}
)CL";

struct DTypeC {
  const char* name;     // kernel suffix
  const char* storage;  // OpenCL C type in memory
  const char* compute;  // what it is loaded to
  bool fp64;
};
constexpr DTypeC kDTypes[] = {
    {"f32", "float", "float", false},   {"f64", "double", "double", true}, {"f16", "ushort", "float", false},
    {"bf16", "ushort", "float", false}, {"i32", "int", "uint", false},     {"i64", "long", "ulong", false},
};
constexpr std::pair<const char*, const char*> kBits[] = {
    {"u8", "uchar"}, {"u16", "ushort"}, {"u32", "uint"}, {"u64", "ulong"}};
constexpr std::pair<const char*, const char*> kIndexTypes[] = {{"i32", "int"}, {"i64", "long"}};

// The placeholders are replaced longest first ($IN before $I, $N).
std::string coreSource() {
  std::string source;
  for (const auto& [name, type] : kBits) {
    source += instantiate(kGather, {{"$N", name}, {"$S", type}});
    for (const auto& [indexName, indexType] : kIndexTypes)
      source += instantiate(kSelect, {{"$IN", indexName}, {"$I", indexType}, {"$N", name}, {"$S", type}});
  }
  for (const DTypeC& t : kDTypes) {
    std::string kernels = instantiate(kGemm, {{"$N", t.name}, {"$S", t.storage}, {"$A", t.compute}});
    for (const auto& [indexName, indexType] : kIndexTypes)
      kernels += instantiate(kAdd, {{"$IN", indexName}, {"$I", indexType}, {"$N", t.name}, {"$S", t.storage}});
    source += t.fp64 ? "#ifdef cl_khr_fp64\n" + kernels + "#endif\n" : kernels;
  }
  return source;
}

std::string programSource(KernelProgram which) {
  switch (which) {
    case KernelProgram::core: return kPrelude + coreSource();
    case KernelProgram::conv: return kPrelude + convKernelSource();
  }
  return "";
}

const char* programName(KernelProgram which) {
  switch (which) {
    case KernelProgram::core: return "library kernels";
    case KernelProgram::conv: return "convolution kernels";
  }
  return "";
}

// --- programs and kernels, per device ---

struct Kernel {
  cl_kernel kernel = nullptr;
  std::mutex mutex;  // clSetKernelArg is not safe on one cl_kernel from two threads
};

struct Program {
  std::mutex mutex;
  cl_program program = nullptr;
  std::map<std::string, std::unique_ptr<Kernel>> kernels;
};

std::string buildLog(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) != CL_SUCCESS || size <= 1)
    return "(no log)";
  std::string log(size, '\0');
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

/// Device `index`'s program `which`, built on first use; alive for the
/// process (like the contexts, it outlives static destruction).
Program& programOf(int index, KernelProgram which) {
  static std::mutex mutex;
  static auto* programs = new std::map<std::pair<int, KernelProgram>, std::unique_ptr<Program>>();
  Program* program = nullptr;
  {
    std::lock_guard lock(mutex);
    auto& slot = (*programs)[{index, which}];
    if (!slot) slot = std::make_unique<Program>();
    program = slot.get();
  }
  std::lock_guard lock(program->mutex);
  if (program->program) return *program;
  const std::string source = programSource(which);
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int status = CL_SUCCESS;
  cl_program built = clCreateProgramWithSource(context(index), 1, &text, &length, &status);
  KILN_CHECK(status == CL_SUCCESS, "opencl:{}: clCreateProgramWithSource failed for the {}: {}", index,
             programName(which), errorName(status));
  cl_device_id device = deviceId(index);
  status = clBuildProgram(built, 1, &device, kBuildOptions, nullptr, nullptr);
  if (status != CL_SUCCESS) {
    const std::string log = buildLog(built, device);
    clReleaseProgram(built);
    fail("opencl:{}: building the {} failed ({}):\n{}", index, programName(which), errorName(status), log);
  }
  program->program = built;
  return *program;
}

Kernel& kernelOf(int index, const std::string& name, KernelProgram which) {
  Program& program = programOf(index, which);
  std::lock_guard lock(program.mutex);
  std::unique_ptr<Kernel>& slot = program.kernels[name];
  if (!slot) {
    cl_int status = CL_SUCCESS;
    cl_kernel kernel = clCreateKernel(program.program, name.c_str(), &status);
    KILN_CHECK(status == CL_SUCCESS, "opencl:{}: no library kernel {} ({}){}", index, name, errorName(status),
               name.find("f64") != std::string::npos && !devices()[static_cast<size_t>(index)].fp64
                   ? ": the device has no fp64 (cl_khr_fp64)"
                   : "");
    slot = std::make_unique<Kernel>();
    slot->kernel = kernel;
  }
  return *slot;
}

}  // namespace

std::string instantiate(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values)
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  return text;
}

void launchKernel(int index, cl_command_queue queue, const std::string& name, std::initializer_list<cl_mem> buffers,
                  const void* args, size_t argsBytes, int64_t items, KernelProgram program) {
  if (items <= 0) return;  // OpenCL rejects an empty range
  Kernel& k = kernelOf(index, name, program);
  const auto local = static_cast<size_t>(kLocalSize);
  const size_t global = (static_cast<size_t>(items) + local - 1) / local * local;  // whole work-groups (PoCL)
  std::lock_guard lock(k.mutex);
  cl_uint at = 0;
  for (cl_mem mem : buffers) KILN_CL(clSetKernelArg(k.kernel, at++, sizeof(cl_mem), &mem));
  KILN_CL(clSetKernelArg(k.kernel, at, argsBytes, args));
  KILN_CL(clEnqueueNDRangeKernel(queue, k.kernel, 1, nullptr, &global, &local, 0, nullptr, nullptr));
}

std::string kernelSuffix(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: break;
  }
  KILN_ASSERT(false, "no OpenCL library kernel computes in {}", dtypeName(dtype));
  return "";
}

std::string bitsSuffix(int64_t itemBytes) {
  KILN_ASSERT(itemBytes == 1 || itemBytes == 2 || itemBytes == 4 || itemBytes == 8, "elements of {} bytes", itemBytes);
  return fmt::format("u{}", itemBytes * 8);
}

void mergeDims(std::vector<int64_t>& sizes, std::vector<std::vector<int64_t>*> strides, int64_t& keep) {
  std::vector<int64_t> newSizes;
  std::vector<std::vector<int64_t>> newStrides(strides.size());
  int64_t newKeep = -1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    const bool kept = static_cast<int64_t>(d) == keep;
    if (!kept && sizes[d] == 1) continue;
    bool merge = !kept && !newSizes.empty() && newKeep != static_cast<int64_t>(newSizes.size()) - 1;
    for (size_t s = 0; merge && s < strides.size(); ++s) merge = newStrides[s].back() == (*strides[s])[d] * sizes[d];
    if (merge) {
      newSizes.back() *= sizes[d];
      for (size_t s = 0; s < strides.size(); ++s) newStrides[s].back() = (*strides[s])[d];
      continue;
    }
    if (kept) newKeep = static_cast<int64_t>(newSizes.size());
    newSizes.push_back(sizes[d]);
    for (size_t s = 0; s < strides.size(); ++s) newStrides[s].push_back((*strides[s])[d]);
  }
  sizes = std::move(newSizes);
  for (size_t s = 0; s < strides.size(); ++s) *strides[s] = std::move(newStrides[s]);
  keep = newKeep;
}

void enqueueGather(int index, cl_command_queue queue, int64_t itemBytes, cl_mem src, int64_t srcOffset,
                   std::vector<int64_t> sizes, std::vector<int64_t> strides, cl_mem dst, int64_t dstOffset) {
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;
  if (numel == 0) return;
  int64_t none = -1;
  mergeDims(sizes, {&strides}, none);
  if (sizes.empty() || (sizes.size() == 1 && strides[0] == 1)) {  // contiguous: a plain copy
    if (src == dst && srcOffset == dstOffset) return;             // onto itself (an in-place call)
    KILN_CL(clEnqueueCopyBuffer(queue, src, dst, static_cast<size_t>(srcOffset * itemBytes),
                                static_cast<size_t>(dstOffset * itemBytes), static_cast<size_t>(numel * itemBytes), 0,
                                nullptr, nullptr));
    return;
  }
  if (sizes.size() > static_cast<size_t>(kMaxDims)) {  // more dims than a kernel walks: split the outermost
    const int64_t inner = numel / sizes[0];
    const std::vector<int64_t> innerSizes(sizes.begin() + 1, sizes.end());
    const std::vector<int64_t> innerStrides(strides.begin() + 1, strides.end());
    for (int64_t i = 0; i < sizes[0]; ++i)
      enqueueGather(index, queue, itemBytes, src, srcOffset + i * strides[0], innerSizes, innerStrides, dst,
                    dstOffset + i * inner);
    return;
  }
  GatherArgs args;
  args.numel = numel, args.srcOffset = srcOffset, args.dstOffset = dstOffset;
  args.rank = static_cast<int64_t>(sizes.size());
  std::copy(sizes.begin(), sizes.end(), args.sizes);
  std::copy(strides.begin(), strides.end(), args.strides);
  launchKernel(index, queue, "kiln_gather_" + bitsSuffix(itemBytes), {src, dst}, args, numel);
}

int64_t elementOffset(const char* op, DevicePtr ptr, int64_t itemBytes) {
  KILN_ASSERT(ptr.offset % static_cast<size_t>(itemBytes) == 0,
              "{}: a buffer at byte {}, not a whole element of {} bytes", op, ptr.offset, itemBytes);
  return static_cast<int64_t>(ptr.offset) / itemBytes;
}

}  // namespace kiln::runtime::opencl
#endif  // KILN_HAVE_OPENCL
