// kiln's direct convolution loops on the host (runtime/conv.h,
// detail::convDirect): every float dtype, parallel over kiln's pool by
// output planes (forward), input planes (transpose) or weight planes
// (weightGrad), each element a sum in double rounded once. They are the
// reference the tests hold oneDNN and the OpenCL kernels to, the path for
// f64 and f16, and the algorithm `direct` of the choice (Note [Choosing a
// convolution algorithm] in runtime/conv.cpp).
#include "runtime/conv.h"
#include "runtime/error.h"
#include "runtime/numeric.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime::detail {

namespace {

template <typename T>
double at(const void* base, const std::array<int64_t, 4>& s, int64_t a, int64_t b, int64_t c, int64_t d) {
  return static_cast<double>(static_cast<const T*>(base)[a * s[0] + b * s[1] + c * s[2] + d * s[3]]);
}

template <typename T>
void direct(const ConvCall& k, std::span<void* const> buffers) {
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  ThreadPool& pool = ThreadPool::instance();
  if (k.kind == ConvCall::Kind::forward) {  // x, w -> y
    const void *x = buffers[0], *w = buffers[1];
    T* y = static_cast<T*>(buffers[2]);
    pool.parallelFor(k.n * k.o, 1, [&](int64_t begin, int64_t end) {
      for (int64_t no = begin; no < end; ++no) {
        const int64_t n = no / k.o, o = no % k.o, g = o / og;
        for (int64_t i = 0; i < k.ho; ++i)
          for (int64_t j = 0; j < k.wo; ++j) {
            double acc = 0;
            for (int64_t cc = 0; cc < cg; ++cc)
              for (int64_t p = 0; p < k.kh; ++p) {
                const int64_t ih = i * k.strideH + p * k.dilationH - k.padTop;
                if (ih < 0 || ih >= k.h) continue;
                for (int64_t q = 0; q < k.kw; ++q) {
                  const int64_t iw = j * k.strideW + q * k.dilationW - k.padLeft;
                  if (iw < 0 || iw >= k.w) continue;
                  acc += at<T>(x, k.xStrides, n, g * cg + cc, ih, iw) * at<T>(w, k.wStrides, o, cc, p, q);
                }
              }
            y[((n * k.o + o) * k.ho + i) * k.wo + j] = static_cast<T>(acc);
          }
      }
    });
  } else if (k.kind == ConvCall::Kind::transpose) {  // y, w -> x
    const void *y = buffers[0], *w = buffers[1];
    T* x = static_cast<T*>(buffers[2]);
    pool.parallelFor(k.n * k.c, 1, [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        const int64_t n = nc / k.c, c = nc % k.c, g = c / cg, cc = c % cg;
        for (int64_t ih = 0; ih < k.h; ++ih)
          for (int64_t iw = 0; iw < k.w; ++iw) {
            double acc = 0;
            for (int64_t p = 0; p < k.kh; ++p) {
              const int64_t ti = ih + k.padTop - p * k.dilationH;
              if (ti < 0 || ti % k.strideH != 0 || ti / k.strideH >= k.ho) continue;
              for (int64_t q = 0; q < k.kw; ++q) {
                const int64_t tj = iw + k.padLeft - q * k.dilationW;
                if (tj < 0 || tj % k.strideW != 0 || tj / k.strideW >= k.wo) continue;
                for (int64_t oo = 0; oo < og; ++oo) {
                  const int64_t o = g * og + oo;
                  acc += at<T>(y, k.yStrides, n, o, ti / k.strideH, tj / k.strideW) * at<T>(w, k.wStrides, o, cc, p, q);
                }
              }
            }
            x[((n * k.c + c) * k.h + ih) * k.w + iw] = static_cast<T>(acc);
          }
      }
    });
  } else {  // x, y -> w
    const void *x = buffers[0], *y = buffers[1];
    T* w = static_cast<T*>(buffers[2]);
    pool.parallelFor(k.o * cg, 1, [&](int64_t begin, int64_t end) {
      for (int64_t oc = begin; oc < end; ++oc) {
        const int64_t o = oc / cg, cc = oc % cg, c = (o / og) * cg + cc;
        for (int64_t p = 0; p < k.kh; ++p)
          for (int64_t q = 0; q < k.kw; ++q) {
            double acc = 0;
            for (int64_t n = 0; n < k.n; ++n)
              for (int64_t i = 0; i < k.ho; ++i) {
                const int64_t ih = i * k.strideH + p * k.dilationH - k.padTop;
                if (ih < 0 || ih >= k.h) continue;
                for (int64_t j = 0; j < k.wo; ++j) {
                  const int64_t iw = j * k.strideW + q * k.dilationW - k.padLeft;
                  if (iw < 0 || iw >= k.w) continue;
                  acc += at<T>(x, k.xStrides, n, c, ih, iw) * at<T>(y, k.yStrides, n, o, i, j);
                }
              }
            w[((o * cg + cc) * k.kh + p) * k.kw + q] = static_cast<T>(acc);
          }
      }
    });
  }
}

}  // namespace

void convDirect(const ConvCall& call, std::span<void* const> buffers) {
  switch (call.dtype) {
    case DType::f32: return direct<float>(call, buffers);
    case DType::f64: return direct<double>(call, buffers);
    case DType::f16: return direct<Half>(call, buffers);
    case DType::bf16: return direct<BFloat16>(call, buffers);
    default: KILN_ASSERT(false, "conv of {}", dtypeName(call.dtype));
  }
}

}  // namespace kiln::runtime::detail
