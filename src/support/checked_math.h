/*!
 * \file support/checked_math.h
 * \brief Overflow-checked int64 arithmetic for sizes, element counts, cycles and byte sums.
 *
 * Shapes, attributes and the NPUConfig come from user JSON, so a product of dims, a window span
 * or a sum of cycles can exceed int64, which is undefined behaviour in C++. Every such
 * computation that user input reaches goes through these helpers; an overflow becomes a
 * ValueError naming the quantity, never a wrapped value. The checks are single compiler
 * builtins (one flag test each), cheap enough for per-command use.
 */
#ifndef EXAMPLE_NPU_SUPPORT_CHECKED_MATH_H_
#define EXAMPLE_NPU_SUPPORT_CHECKED_MATH_H_

#include <tvm/ffi/error.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace example_npu {
namespace checked {

[[noreturn]] inline void ThrowOverflow(const char* what) {
  TVM_FFI_THROW(ValueError) << what << " does not fit a 64-bit integer";
  TVM_FFI_UNREACHABLE();
}

/*! \brief a * b; ValueError naming `what` on overflow. */
inline int64_t Mul(int64_t a, int64_t b, const char* what) {
  int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) ThrowOverflow(what);
  return result;
}

/*! \brief a + b; ValueError naming `what` on overflow. */
inline int64_t Add(int64_t a, int64_t b, const char* what) {
  int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) ThrowOverflow(what);
  return result;
}

/*! \brief a - b; ValueError naming `what` on overflow. */
inline int64_t Sub(int64_t a, int64_t b, const char* what) {
  int64_t result = 0;
  if (__builtin_sub_overflow(a, b, &result)) ThrowOverflow(what);
  return result;
}

/*! \brief The product of `dims` (1 for none); ValueError naming `what` on overflow. */
inline int64_t Product(const std::vector<int64_t>& dims, const char* what) {
  int64_t result = 1;
  for (int64_t dim : dims) result = Mul(result, dim, what);
  return result;
}

/*!
 * \brief A finite double as int64 (truncated toward zero); ValueError naming `what` when it is
 * NaN, infinite or outside the int64 range (a C++ cast would be undefined behaviour).
 */
inline int64_t ToInt64(double value, const char* what) {
  // 2^63 is exact in double; every double below it converts.
  if (!(value > -9223372036854775808.0 && value < 9223372036854775808.0)) ThrowOverflow(what);
  return static_cast<int64_t>(value);
}

}  // namespace checked
}  // namespace example_npu

#endif  // EXAMPLE_NPU_SUPPORT_CHECKED_MATH_H_
