// The OpenCL C of the conv program (runtime/opencl_kernels.h): the three
// direct convolutions of runtime/conv.h that runtime/opencl_conv.cpp
// launches, for f32, f64 (inside #ifdef cl_khr_fp64), f16 and bf16.
//
// Each kernel follows conv.h's formula
//   y[n, o, i, j] = Σ_{c in o's group, p, q}
//                   x[n, c, i·sh + p·dh − pt, j·sw + q·dw − pl] · w[o, c − g·C/G, p, q]
// solved for the tensor it writes, and computes a register tile of it: $T
// (1 or 4) channels times 4 columns, the columns as one 4-vector per
// channel, so that each element loaded is used several times:
// - forward: y[n, o0..o0+$T-1, i, j0..j0+3] (the channels of one group);
//   sums over the group's input channels and the window positions (p, q).
//   An x element serves $T channels, a w element 4 columns.
// - transpose (x's gradient): x[n, c0..c0+$T-1, ih, iw0 + k·sw] for k =
//   0..3 (sw apart, so that the 4 share which window columns q reach them:
//   iw + pl − q·dw divisible by sw); sums over the window positions whose
//   ih + pt − p·dh is a multiple of sh with quotient i in [0, HO) (and the
//   same along the width, y's columns j0..j0+3), then the group's output
//   channels. A y element serves $T channels, a w element 4 columns.
// - weightGrad (w's gradient): w[o0..o0+$T-1, c, p, q0..q0+3]; sums over n,
//   i, j. An x element serves $T channels, a y element 4 window columns.
// Rows of the window (or of y) that fall outside x are left out by the
// loop ranges, computed once per work-item. Along a row, where all 4
// columns read inside x (or y) the loads have no tests; elsewhere each
// column is tested and one outside is left out of its sum (select), not
// added as 0 · w, so that an infinite w or y there gives no NaN.
// f16 and bf16 are loaded exactly to float and summed in float (their
// products are exact there), f32 in float, f64 in double; the result is
// rounded once (the prelude's kiln_load_* / kiln_store_*). Contraction to
// FMA is off (the prelude's pragma). No kernel has a barrier.
#if KILN_HAVE_OPENCL
#include <string>

#include "runtime/opencl_kernels.h"

namespace kiln::runtime::opencl {

namespace {

// The argument struct (ConvArgs in runtime/opencl_kernels.h) and the range
// helpers: for start + k·step (step > 0), the first k >= 0 at which it is
// >= 0, and the first at which it is >= limit.
constexpr const char* kConvCommon = R"CL(
typedef struct {
  long total, offsets[3];
  long n, c, h, w, o, kh, kw, ho, wo;
  long strideH, strideW, padTop, padLeft, dilationH, dilationW, groups;
  long xStrides[4], wStrides[4], yStrides[4];
} ConvArgs;

static inline long kiln_conv_first(long start, long step) { return start >= 0 ? 0 : (step - 1 - start) / step; }
static inline long kiln_conv_end(long start, long step, long limit) {
  return start >= limit ? 0 : (limit - start + step - 1) / step;
}
)CL";

// $N: dtype name, $S: its storage type, $A: the type it is summed in, $V:
// a vector of 4 of those, $K and $M: select()'s mask scalar and vector for
// $V, $T: result channels per work-item. Channels past the end of the
// tile's group repeat its last channel's reads and are not written; so are
// columns past the last.
constexpr const char* kForward = R"CL(
KILN_KERNEL kiln_conv_forward_$N_t$T(__global const $S* x, __global const $S* w, __global $S* y, ConvArgs a) {
  const long e = (long)get_global_id(0);
  if (e >= a.total) return;
  const long og = a.o / a.groups, cg = a.c / a.groups, tiles = (og + $T - 1) / $T, quads = (a.wo + 3) / 4;
  const long j0 = e % quads * 4;
  long rest = e / quads;
  const long i = rest % a.ho;
  rest /= a.ho;
  const long tile = rest % (a.groups * tiles), n = rest / (a.groups * tiles);
  const long g = tile / tiles, o0 = g * og + tile % tiles * $T, count = min((long)$T, g * og + og - o0);
  const long lanes = min(4L, a.wo - j0);
  const long ih0 = i * a.strideH - a.padTop, iw0 = j0 * a.strideW - a.padLeft, step = a.strideW * a.xStrides[3];
  const long pEnd = min(a.kh, kiln_conv_end(ih0, a.dilationH, a.h));
  const long pBegin = min(kiln_conv_first(ih0, a.dilationH), pEnd);
  const long qb = lanes == 4 ? min(a.kw, kiln_conv_end(iw0 + 3 * a.strideW, a.dilationW, a.w)) : 0;
  const long qa = min(kiln_conv_first(iw0, a.dilationW), qb);
  __global const $S* xg = x + a.offsets[0] + n * a.xStrides[0] + g * cg * a.xStrides[1];
  __global const $S* wOut = w + a.offsets[1] + o0 * a.wStrides[0];
  long wt[$T];
  $V acc[$T];
  for (int t = 0; t < $T; ++t) {
    wt[t] = min((long)t, count - 1) * a.wStrides[0];
    acc[t] = ($V)0;
  }
  for (long c = 0; c < cg; ++c)
    for (long p = pBegin; p < pEnd; ++p) {
      __global const $S* xr = xg + c * a.xStrides[1] + (ih0 + p * a.dilationH) * a.xStrides[2];
      __global const $S* wr = wOut + c * a.wStrides[1] + p * a.wStrides[2];
      for (long q = 0; q < a.kw; ++q) {
        const long iw = iw0 + q * a.dilationW;
        $V v;
        if (q >= qa && q < qb) {
          __global const $S* xp = xr + iw * a.xStrides[3];
          v = ($V)(kiln_load_$N(xp[0]), kiln_load_$N(xp[step]), kiln_load_$N(xp[2 * step]),
                   kiln_load_$N(xp[3 * step]));
          for (int t = 0; t < $T; ++t) acc[t] += v * ($V)kiln_load_$N(wr[wt[t] + q * a.wStrides[3]]);
        } else {
          $A lane[4];
          $K in[4];
          for (int k = 0; k < 4; ++k) {
            const long at = iw + k * a.strideW;
            in[k] = k < lanes && at >= 0 && at < a.w ? -1 : 0;
            lane[k] = in[k] ? kiln_load_$N(xr[at * a.xStrides[3]]) : ($A)0;
          }
          v = ($V)(lane[0], lane[1], lane[2], lane[3]);
          const $M mask = ($M)(in[0], in[1], in[2], in[3]);
          for (int t = 0; t < $T; ++t)
            acc[t] = select(acc[t], acc[t] + v * ($V)kiln_load_$N(wr[wt[t] + q * a.wStrides[3]]), mask);
        }
      }
    }
  __global $S* out = y + a.offsets[2] + n * a.yStrides[0] + o0 * a.yStrides[1] + i * a.yStrides[2] + j0 * a.yStrides[3];
  for (int t = 0; t < $T; ++t) {
    const $A r[4] = {acc[t].s0, acc[t].s1, acc[t].s2, acc[t].s3};
    for (int k = 0; k < 4; ++k)
      if (t < count && k < lanes) out[t * a.yStrides[1] + k * a.yStrides[3]] = kiln_store_$N(r[k]);
  }
}
)CL";

// $T input channels per work-item, and 4 columns of x, sw apart: iw0 + k·sw
// for k = 0..3, iw0 = r + 4·m·sw (each residue r of the columns mod sw in
// quads). The 4 columns then share which window columns q reach them
// (iw + pl − q·dw divisible by sw), and read 4 neighbouring columns
// j0..j0+3 of y, loaded without tests where all 4 are inside y (elsewhere
// a column outside y is left out of its sum); each w element loaded is
// used for 4 columns, each y element for $T channels. p
// falls through the window while ih + pt − p·dh stays >= 0 (dilation >= 1),
// so the loop stops at the first negative one.
constexpr const char* kTranspose = R"CL(
KILN_KERNEL kiln_conv_transpose_$N_t$T(__global const $S* y, __global const $S* w, __global $S* x, ConvArgs a) {
  const long e = (long)get_global_id(0);
  if (e >= a.total) return;
  const long og = a.o / a.groups, cg = a.c / a.groups, tiles = (cg + $T - 1) / $T;
  const long sw = a.strideW, quads = ((a.w + sw - 1) / sw + 3) / 4;
  const long m = e % quads;
  long rest = e / quads;
  const long r = rest % sw;
  rest /= sw;
  const long ih = rest % a.h;
  rest /= a.h;
  const long tile = rest % (a.groups * tiles), n = rest / (a.groups * tiles);
  const long g = tile / tiles, cl0 = tile % tiles * $T, count = min((long)$T, cg - cl0);
  const long iw0 = r + 4 * m * sw, lanes = clamp((a.w - iw0 + sw - 1) / sw, 0L, 4L);
  if (lanes == 0) return;  // past the last column of residue r
  __global const $S* yg = y + a.offsets[0] + n * a.yStrides[0] + g * og * a.yStrides[1];
  __global const $S* wg = w + a.offsets[1] + g * og * a.wStrides[0] + cl0 * a.wStrides[1];
  long wt[$T];
  $V acc[$T];
  for (int t = 0; t < $T; ++t) {
    wt[t] = min((long)t, count - 1) * a.wStrides[1];
    acc[t] = ($V)0;
  }
  for (long p = 0; p < a.kh; ++p) {
    const long at = ih + a.padTop - p * a.dilationH;
    if (at < 0) break;
    if (at % a.strideH != 0) continue;
    const long i = at / a.strideH;
    if (i >= a.ho) continue;
    for (long q = 0; q < a.kw; ++q) {
      const long bt = iw0 + a.padLeft - q * a.dilationW;
      if ((bt % sw + sw) % sw != 0) continue;
      const long j0 = bt / sw;  // exact; lane k reads column j0 + k of y
      const long kLo = max(0L, -j0), kHi = min(lanes, a.wo - j0);
      if (kLo >= kHi) continue;
      __global const $S* yi = yg + i * a.yStrides[2];
      __global const $S* wp = wg + p * a.wStrides[2] + q * a.wStrides[3];
      if (kLo == 0 && kHi == 4) {
        __global const $S* yp = yi + j0 * a.yStrides[3];
        const long s = a.yStrides[3];
        for (long o = 0; o < og; ++o) {
          __global const $S* yo = yp + o * a.yStrides[1];
          const $V v = ($V)(kiln_load_$N(yo[0]), kiln_load_$N(yo[s]), kiln_load_$N(yo[2 * s]), kiln_load_$N(yo[3 * s]));
          for (int t = 0; t < $T; ++t) acc[t] += v * ($V)kiln_load_$N(wp[o * a.wStrides[0] + wt[t]]);
        }
      } else {
        $K in[4];
        for (int k = 0; k < 4; ++k) in[k] = k >= kLo && k < kHi ? -1 : 0;
        const $M mask = ($M)(in[0], in[1], in[2], in[3]);
        for (long o = 0; o < og; ++o) {
          $A lane[4];
          for (int k = 0; k < 4; ++k)
            lane[k] = in[k] ? kiln_load_$N(yi[o * a.yStrides[1] + (j0 + k) * a.yStrides[3]]) : ($A)0;
          const $V v = ($V)(lane[0], lane[1], lane[2], lane[3]);
          for (int t = 0; t < $T; ++t)
            acc[t] = select(acc[t], acc[t] + v * ($V)kiln_load_$N(wp[o * a.wStrides[0] + wt[t]]), mask);
        }
      }
    }
  }
  __global $S* out = x + a.offsets[2] + n * a.xStrides[0] + (g * cg + cl0) * a.xStrides[1] + ih * a.xStrides[2] +
                     iw0 * a.xStrides[3];
  for (int t = 0; t < $T; ++t) {
    const $A v[4] = {acc[t].s0, acc[t].s1, acc[t].s2, acc[t].s3};
    for (int k = 0; k < 4; ++k)
      if (t < count && k < lanes) out[t * a.xStrides[1] + k * sw * a.xStrides[3]] = kiln_store_$N(v[k]);
  }
}
)CL";

// $T output channels per work-item, and 4 window columns q0..q0+3 (fewer
// in the last quad of a row of the window: the lanes past it repeat the
// last one's reads and are not written). For each (n, i, j) the $T
// channels share the 4 x elements and the 4 columns share each y element.
// Where all the columns read inside x (j in [jFast, jFastEnd)), x is loaded
// without tests; elsewhere each column is tested, and left out of its sum
// where it reads outside x.
constexpr const char* kWeightGrad = R"CL(
KILN_KERNEL kiln_conv_weight_grad_$N_t$T(__global const $S* x, __global const $S* y, __global $S* w, ConvArgs a) {
  const long e = (long)get_global_id(0);
  if (e >= a.total) return;
  const long og = a.o / a.groups, cg = a.c / a.groups, tiles = (og + $T - 1) / $T, quads = (a.kw + 3) / 4;
  const long q0 = e % quads * 4;
  long rest = e / quads;
  const long p = rest % a.kh;
  rest /= a.kh;
  const long c = rest % cg, tile = rest / cg;
  const long g = tile / tiles, o0 = g * og + tile % tiles * $T, count = min((long)$T, g * og + og - o0);
  const long lanes = min(4L, a.kw - q0);
  // Lane k reads x's column j·sw + b + k·dw.
  const long ih0 = p * a.dilationH - a.padTop, b = q0 * a.dilationW - a.padLeft, last = b + (lanes - 1) * a.dilationW;
  const long iEnd = min(a.ho, kiln_conv_end(ih0, a.strideH, a.h));
  const long iBegin = min(kiln_conv_first(ih0, a.strideH), iEnd);
  // The j some column reads inside x, and those all of them do (the last
  // column starts reading first and stops first).
  const long jEnd = min(a.wo, kiln_conv_end(b, a.strideW, a.w));
  const long jBegin = min(kiln_conv_first(last, a.strideW), jEnd);
  const long jFast = kiln_conv_first(b, a.strideW), jFastEnd = min(a.wo, kiln_conv_end(last, a.strideW, a.w));
  long lo[4];
  for (int k = 0; k < 4; ++k) lo[k] = min((long)k, lanes - 1) * a.dilationW * a.xStrides[3];
  __global const $S* xc = x + a.offsets[0] + (g * cg + c) * a.xStrides[1];
  __global const $S* yo = y + a.offsets[1] + o0 * a.yStrides[1];
  long yt[$T];
  $V acc[$T];
  for (int t = 0; t < $T; ++t) {
    yt[t] = min((long)t, count - 1) * a.yStrides[1];
    acc[t] = ($V)0;
  }
  for (long n = 0; n < a.n; ++n)
    for (long i = iBegin; i < iEnd; ++i) {
      __global const $S* xr = xc + n * a.xStrides[0] + (ih0 + i * a.strideH) * a.xStrides[2];
      __global const $S* yr = yo + n * a.yStrides[0] + i * a.yStrides[2];
      for (long j = jBegin; j < jEnd; ++j) {
        const long at = j * a.strideW + b;
        $V v;
        if (j >= jFast && j < jFastEnd) {
          __global const $S* xp = xr + at * a.xStrides[3];
          v = ($V)(kiln_load_$N(xp[lo[0]]), kiln_load_$N(xp[lo[1]]), kiln_load_$N(xp[lo[2]]), kiln_load_$N(xp[lo[3]]));
          for (int t = 0; t < $T; ++t) acc[t] += v * ($V)kiln_load_$N(yr[yt[t] + j * a.yStrides[3]]);
        } else {
          $A lane[4];
          $K in[4];
          for (int k = 0; k < 4; ++k) {
            const long col = at + k * a.dilationW;
            in[k] = k < lanes && col >= 0 && col < a.w ? -1 : 0;
            lane[k] = in[k] ? kiln_load_$N(xr[col * a.xStrides[3]]) : ($A)0;
          }
          v = ($V)(lane[0], lane[1], lane[2], lane[3]);
          const $M mask = ($M)(in[0], in[1], in[2], in[3]);
          for (int t = 0; t < $T; ++t)
            acc[t] = select(acc[t], acc[t] + v * ($V)kiln_load_$N(yr[yt[t] + j * a.yStrides[3]]), mask);
        }
      }
    }
  __global $S* out = w + a.offsets[2] + o0 * a.wStrides[0] + c * a.wStrides[1] + p * a.wStrides[2] + q0 * a.wStrides[3];
  for (int t = 0; t < $T; ++t) {
    const $A r[4] = {acc[t].s0, acc[t].s1, acc[t].s2, acc[t].s3};
    for (int k = 0; k < 4; ++k)
      if (t < count && k < lanes) out[t * a.wStrides[0] + k * a.wStrides[3]] = kiln_store_$N(r[k]);
  }
}
)CL";

struct ConvDType {
  const char* name;
  const char* storage;
  const char* sum;
  const char* sum4;
  const char* mask;  // select()'s mask of a sum4: a lane is taken where its top bit is set
  const char* mask4;
  bool fp64;
};
constexpr ConvDType kConvDTypes[] = {
    {"f32", "float", "float", "float4", "int", "int4", false},
    {"f64", "double", "double", "double4", "long", "long4", true},
    {"f16", "ushort", "float", "float4", "int", "int4", false},
    {"bf16", "ushort", "float", "float4", "int", "int4", false},
};

}  // namespace

std::string convKernelSource() {
  std::string source = kConvCommon;
  for (const ConvDType& t : kConvDTypes) {
    std::string kernels;
    for (const char* tile : {"1", "4"})
      for (const char* text : {kForward, kTranspose, kWeightGrad})
        kernels += instantiate(text, {{"$N", t.name},
                                      {"$S", t.storage},
                                      {"$A", t.sum},
                                      {"$V", t.sum4},
                                      {"$K", t.mask},
                                      {"$M", t.mask4},
                                      {"$T", tile}});
    source += t.fp64 ? "#ifdef cl_khr_fp64\n" + kernels + "#endif\n" : kernels;
  }
  return source;
}

}  // namespace kiln::runtime::opencl
#endif  // KILN_HAVE_OPENCL
