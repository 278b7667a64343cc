// The index_select and index_add library calls of runtime/indexing.h.
#include "runtime/indexing.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "runtime/error.h"
#include "runtime/numeric.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

std::vector<int64_t> IndexCall::encode() const {
  KILN_ASSERT(sizes.size() == strides.size() && (sourceStrides.empty() || sourceStrides.size() == sizes.size()),
              "index call with {} sizes, {} strides and {} source strides", sizes.size(), strides.size(),
              sourceStrides.size());
  std::vector<int64_t> args = {
      static_cast<int64_t>(dtype),        static_cast<int64_t>(indexDType), dim, numIndices, indexStride,
      static_cast<int64_t>(sizes.size()), sourceStrides.empty() ? 0 : 1};
  args.insert(args.end(), sizes.begin(), sizes.end());
  args.insert(args.end(), strides.begin(), strides.end());
  args.insert(args.end(), sourceStrides.begin(), sourceStrides.end());
  return args;
}

IndexCall IndexCall::decode(std::span<const int64_t> args) {
  KILN_ASSERT(args.size() >= 7, "index call with {} arguments", args.size());
  IndexCall c;
  c.dtype = static_cast<DType>(args[0]);
  c.indexDType = static_cast<DType>(args[1]);
  c.dim = args[2], c.numIndices = args[3], c.indexStride = args[4];
  const auto rank = static_cast<size_t>(args[5]);
  const bool source = args[6] != 0;
  KILN_ASSERT(args.size() == 7 + rank * (source ? 3 : 2) && c.dim >= 0 && c.dim < static_cast<int64_t>(rank),
              "index call with {} arguments for rank {}, dim {}", args.size(), rank, c.dim);
  auto take = [&](size_t at) {
    return std::vector<int64_t>(args.begin() + 7 + at * rank, args.begin() + 7 + (at + 1) * rank);
  };
  c.sizes = take(0);
  c.strides = take(1);
  if (source) c.sourceStrides = take(2);
  return c;
}

namespace {

// Elements per parallel task, as for kernels: whole cache lines of work.
constexpr int64_t kGrainElements = 32768;

/// The indices, read through their stride and checked against `size`.
std::vector<int64_t> readIndices(const char* op, const void* index, const IndexCall& c) {
  std::vector<int64_t> out(static_cast<size_t>(c.numIndices));
  const int64_t size = c.sizes[static_cast<size_t>(c.dim)];
  for (int64_t j = 0; j < c.numIndices; ++j) {
    const int64_t i = c.indexDType == DType::i32 ? static_cast<const int32_t*>(index)[j * c.indexStride]
                                                 : static_cast<const int64_t*>(index)[j * c.indexStride];
    KILN_CHECK(i >= 0 && i < size, "{}: index {} is out of range for dimension {} of size {}", op, i, c.dim, size);
    out[static_cast<size_t>(j)] = i;
  }
  return out;
}

/// Element offset of the `linear`-th element (row-major) of the dims
/// [first, last) of a tensor with these sizes and strides.
int64_t offsetOf(int64_t linear, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, size_t first,
                 size_t last) {
  int64_t offset = 0;
  for (size_t d = last; d-- > first;) {
    offset += linear % sizes[d] * strides[d];
    linear /= sizes[d];
  }
  return offset;
}

int64_t product(const std::vector<int64_t>& sizes, size_t first, size_t last) {
  int64_t n = 1;
  for (size_t d = first; d < last; ++d) n *= sizes[d];
  return n;
}

/// Whether the dims [first, end) are laid out contiguously (row-major, unit
/// innermost stride); size-1 dims do not matter.
bool innerContiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, size_t first) {
  int64_t expected = 1;
  for (size_t d = sizes.size(); d-- > first;) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

/// Copies `count` elements of `item` bytes, the source `stride` elements apart.
void copyStrided(char* dst, const char* src, int64_t count, int64_t item, const std::vector<int64_t>& sizes,
                 const std::vector<int64_t>& strides, size_t first, bool contiguous) {
  if (contiguous) {
    std::memcpy(dst, src, static_cast<size_t>(count * item));
    return;
  }
  for (int64_t e = 0; e < count; ++e)
    std::memcpy(dst + e * item, src + offsetOf(e, sizes, strides, first, sizes.size()) * item,
                static_cast<size_t>(item));
}

/// out[e] += src[e] for `count` elements, src strided, in dtype T's arithmetic.
template <typename T>
void addInto(char* out, const char* src, int64_t count, const std::vector<int64_t>& sizes,
             const std::vector<int64_t>& strides, size_t first, int64_t skip, bool contiguous) {
  T* o = reinterpret_cast<T*>(out);
  const T* s = reinterpret_cast<const T*>(src);
  for (int64_t e = 0; e < count; ++e) {
    const T v = contiguous ? s[e] : s[offsetOf(skip + e, sizes, strides, first, sizes.size())];
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      o[e] = T(static_cast<float>(o[e]) + static_cast<float>(v));
    } else if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      o[e] = static_cast<T>(static_cast<U>(o[e]) + static_cast<U>(v));
    } else {
      o[e] = o[e] + v;
    }
  }
}

using AddFn = void (*)(char*, const char*, int64_t, const std::vector<int64_t>&, const std::vector<int64_t>&, size_t,
                       int64_t, bool);

AddFn addFn(DType dtype) {
  switch (dtype) {
    case DType::f32: return addInto<float>;
    case DType::f64: return addInto<double>;
    case DType::f16: return addInto<Half>;
    case DType::bf16: return addInto<BFloat16>;
    case DType::i32: return addInto<int32_t>;
    case DType::i64: return addInto<int64_t>;
    case DType::boolean: break;
  }
  KILN_ASSERT(false, "index_add of {} reached the runtime", dtypeName(dtype));
  return nullptr;
}

/// x (strided) to out (contiguous), parallel.
void copyAll(const char* x, char* out, const IndexCall& c, int64_t item) {
  const int64_t numel = product(c.sizes, 0, c.sizes.size());
  if (innerContiguous(c.sizes, c.strides, 0)) {
    ThreadPool::instance().parallelFor(numel, kGrainElements, [&](int64_t begin, int64_t end) {
      std::memcpy(out + begin * item, x + begin * item, static_cast<size_t>((end - begin) * item));
    });
    return;
  }
  ThreadPool::instance().parallelFor(numel, kGrainElements, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e)
      std::memcpy(out + e * item, x + offsetOf(e, c.sizes, c.strides, 0, c.sizes.size()) * item,
                  static_cast<size_t>(item));
  });
}

}  // namespace

void indexSelect(std::span<void* const> buffers, std::span<const int64_t> args) {
  KILN_ASSERT(buffers.size() == 3, "index_select call with {} buffers", buffers.size());
  const IndexCall c = IndexCall::decode(args);
  const std::vector<int64_t> index = readIndices("index_select", buffers[1], c);
  const auto dim = static_cast<size_t>(c.dim);
  const int64_t item = itemSize(c.dtype);
  const int64_t inner = product(c.sizes, dim + 1, c.sizes.size());
  const int64_t rows = product(c.sizes, 0, dim) * c.numIndices;
  const bool contiguous = innerContiguous(c.sizes, c.strides, dim + 1);
  const char* x = static_cast<const char*>(buffers[0]);
  char* out = static_cast<char*>(buffers[2]);
  if (rows == 0 || inner == 0) return;
  const int64_t grain = std::max<int64_t>(1, kGrainElements / inner);
  ThreadPool::instance().parallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t outer = r / c.numIndices, j = r % c.numIndices;
      const int64_t from = offsetOf(outer, c.sizes, c.strides, 0, dim) + index[static_cast<size_t>(j)] * c.strides[dim];
      copyStrided(out + r * inner * item, x + from * item, inner, item, c.sizes, c.strides, dim + 1, contiguous);
    }
  });
}

void indexAdd(std::span<void* const> buffers, std::span<const int64_t> args) {
  KILN_ASSERT(buffers.size() == 4, "index_add call with {} buffers", buffers.size());
  const IndexCall c = IndexCall::decode(args);
  KILN_ASSERT(!c.sourceStrides.empty(), "index_add call without source strides");
  const std::vector<int64_t> index = readIndices("index_add", buffers[1], c);
  const auto dim = static_cast<size_t>(c.dim);
  const int64_t item = itemSize(c.dtype);
  const AddFn add = addFn(c.dtype);
  const char* x = static_cast<const char*>(buffers[0]);
  const char* source = static_cast<const char*>(buffers[2]);
  char* out = static_cast<char*>(buffers[3]);
  copyAll(x, out, c, item);

  // Source's sizes: x's with the index count at dim.
  std::vector<int64_t> sourceSizes = c.sizes;
  sourceSizes[dim] = c.numIndices;
  const int64_t size = c.sizes[dim];
  const int64_t inner = product(c.sizes, dim + 1, c.sizes.size());
  const int64_t columns = product(c.sizes, 0, dim) * inner;
  const bool contiguous = innerContiguous(sourceSizes, c.sourceStrides, dim + 1);
  if (columns == 0 || c.numIndices == 0) return;
  // Threads split the columns (outer position, element after dim); each
  // walks the index in order over its columns, so sums are in j order.
  ThreadPool::instance().parallelFor(columns, kGrainElements, [&](int64_t begin, int64_t end) {
    for (int64_t col = begin; col < end;) {
      const int64_t outer = col / inner, first = col % inner;
      const int64_t count = std::min(end - col, inner - first);
      const int64_t sourceOuter = offsetOf(outer, sourceSizes, c.sourceStrides, 0, dim);
      for (int64_t j = 0; j < c.numIndices; ++j) {
        char* dst = out + ((outer * size + index[static_cast<size_t>(j)]) * inner + first) * item;
        const int64_t at = sourceOuter + j * c.sourceStrides[dim];
        // Contiguous inner dims: the run starts `first` elements in.
        const char* src = source + (at + (contiguous ? first : 0)) * item;
        add(dst, src, count, sourceSizes, c.sourceStrides, dim + 1, first, contiguous);
      }
      col += count;
    }
  });
}

}  // namespace kiln::runtime
