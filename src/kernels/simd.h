/*!
 * \file kernels/simd.h
 * \brief Portable 8-lane float vectors (GCC/Clang vector extensions) and vector math.
 *
 * V8 code compiles to one ymm instruction per op when the library is built for AVX2 (CMake option
 * EXAMPLE_NPU_NATIVE_ARCH, on by default, builds for the build machine's CPU) and to two xmm
 * instructions on the x86-64 baseline, so the kernels stay portable. The math functions are
 * branch-free polynomial versions of exp / tanh / erf, accurate to a few float ulp, so whole loops
 * vectorise (libm calls do not).
 */
#ifndef EXAMPLE_NPU_KERNELS_SIMD_H_
#define EXAMPLE_NPU_KERNELS_SIMD_H_

#include <cstdint>

#define EXAMPLE_NPU_INLINE inline __attribute__((always_inline))

namespace example_npu {
namespace kernels {
namespace simd {

constexpr int64_t kLanes = 8;
typedef float V8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef uint32_t U8 __attribute__((vector_size(32)));
// Unaligned, may-alias twin used only for loads and stores (as immintrin's __m256_u).
typedef float V8u __attribute__((vector_size(32), may_alias, aligned(4)));

EXAMPLE_NPU_INLINE V8 Load(const float* p) { return *reinterpret_cast<const V8u*>(p); }
EXAMPLE_NPU_INLINE void Store(float* p, V8 v) { *reinterpret_cast<V8u*>(p) = v; }
// x - 0 is exact for every x (unlike x + 0 for -0), so GCC folds it to a single broadcast; a
// braced {x, x, ...} initialiser compiles to a chain of inserts instead.
EXAMPLE_NPU_INLINE V8 Splat(float x) { return x - V8{}; }
EXAMPLE_NPU_INLINE V8 Max(V8 a, V8 b) { return a > b ? a : b; }
EXAMPLE_NPU_INLINE V8 Min(V8 a, V8 b) { return a < b ? a : b; }
EXAMPLE_NPU_INLINE V8 Abs(V8 x) { return (V8)((I8)x & 0x7fffffff); }
EXAMPLE_NPU_INLINE V8 CopySign(V8 mag, V8 sign) {
  return (V8)(((I8)mag & 0x7fffffff) | ((I8)sign & (int32_t)0x80000000));
}

/*! \brief Whether every lane of a comparison mask is true (one movmskps with AVX). */
EXAMPLE_NPU_INLINE bool AllLanes(I8 mask) {
#if defined(__AVX__)
  return __builtin_ia32_movmskps256((V8)mask) == 0xFF;
#else
  uint64_t words[4];
  __builtin_memcpy(words, &mask, sizeof(words));
  return (words[0] & words[1] & words[2] & words[3]) == ~uint64_t{0};
#endif
}

/*! \brief Sum / max of the 8 lanes. */
EXAMPLE_NPU_INLINE float HorizontalSum(V8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}
EXAMPLE_NPU_INLINE float HorizontalMax(V8 v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

/*!
 * \brief e^x (Cephes expf) for x already clamped to [-104, 89]: x = n ln2 + r with |r| <= ln2 / 2,
 * a degree-6 polynomial p for e^r; returns p and n.
 */
EXAMPLE_NPU_INLINE V8 ExpPolynomial(V8 x, I8* n) {
  // Round x / ln2 to nearest with the 1.5 * 2^23 trick (exact for |x / ln2| < 2^22).
  const V8 magic = Splat(12582912.0f);
  const V8 nf = (x * 1.44269504088896341f + magic) - magic;
  V8 r = x - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  V8 p = Splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  *n = __builtin_convertvector(nf, I8);
  return p * (r * r) + r + 1.0f;
}

/*! \brief e^x for x in [-87.3, 88.7] (a normal result): p * 2^n built in the exponent bits. */
EXAMPLE_NPU_INLINE V8 ExpNormal(V8 x) {
  I8 n;
  const V8 p = ExpPolynomial(x, &n);
  return (V8)((U8)p + ((U8)n << 23));
}

/*!
 * \brief e^x, as libm's expf (TVM's LLVM build) at the edges too: overflow gives inf, very
 * negative arguments round once into the subnormals and then to 0, NaN gives NaN. Vectors whose
 * lanes all lie in [-87.3, 88.7] (the normal-result range) take the short path, p * 2^n built
 * in the exponent bits; any other vector applies 2^n as two normal factors 2^(n/2) * 2^(n - n/2).
 * Both give the same bits for normal results.
 */
EXAMPLE_NPU_INLINE V8 Exp(V8 x) {
  const I8 in_range = (x >= -87.3f) & (x <= 88.7f);  // false for NaN
  if (__builtin_expect(AllLanes(in_range), 1)) return ExpNormal(x);
  I8 n;
  // Outside [-104, 89] e^x is 0 or inf in float; the clamp keeps n in [-150, 129] (and maps NaN
  // to -104: NaN is restored at the end).
  const V8 p = ExpPolynomial(Min(Max(x, Splat(-104.0f)), Splat(89.0f)), &n);
  const I8 n_half = n >> 1;                        // n1 + n2 = n, both in [-75, 65]
  const U8 p_scaled = (U8)p + ((U8)n_half << 23);  // p * 2^n1, exact
  const U8 two_n2 = (U8)(n - n_half + 127) << 23;  // 2^n2
  const V8 result = (V8)p_scaled * (V8)two_n2;     // one rounding (subnormal), or inf
  return x == x ? result : x;
}

/*!
 * \brief Exp, but 0 where e^x lies below float's normal range (x < -87.3): a softmax's terms,
 * whose subnormals cannot change its sum (at least 1) and, as outputs, differ from 0 by less
 * than 2^-126, while an x86 core takes a microcode assist to make (and to scale) each one. Other
 * results are Exp's bits.
 */
EXAMPLE_NPU_INLINE V8 ExpOrZero(V8 x) {
  const I8 tiny = x < -87.3f;
  if (__builtin_expect(AllLanes((x <= 88.7f) & ((x >= -87.3f) | tiny)), 1)) {
    return tiny ? Splat(0.0f) : ExpNormal(Max(x, Splat(-87.3f)));
  }
  return tiny ? Splat(0.0f) : Exp(x);  // an overflow or a NaN lane
}

/*! \brief 1 / (1 + e^-x). */
EXAMPLE_NPU_INLINE V8 Sigmoid(V8 x) { return 1.0f / (1.0f + Exp(-x)); }

/*!
 * \brief tanh (Cephes tanhf): an odd polynomial for |x| < 0.625, where 1 - 2 / (e^2x + 1) would
 * cancel, and the exponential form elsewhere (saturating to +-1).
 */
EXAMPLE_NPU_INLINE V8 Tanh(V8 x) {
  const V8 ax = Abs(x);
  const V8 z = x * x;
  V8 p = Splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const V8 small = p * z * x + x;
  const V8 large = CopySign(1.0f - 2.0f / (Exp(ax + ax) + 1.0f), x);
  return ax < 0.625f ? small : large;
}

/*!
 * \brief erf as the rational approximation TVM's own LLVM lowering uses (from Eigen): odd
 * polynomial over even polynomial on x clamped to [-4, 4], where erf is +-1 in float.
 */
EXAMPLE_NPU_INLINE V8 Erf(V8 x) {
  x = Min(Max(x, Splat(-4.0f)), Splat(4.0f));
  const V8 x2 = x * x;
  V8 p = Splat(-2.72614225801306e-10f);
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * x;
  V8 q = Splat(-1.45660718464996e-05f);
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return p / q;
}

}  // namespace simd
}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_SIMD_H_
