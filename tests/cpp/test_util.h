/*!
 * \file tests/cpp/test_util.h
 * \brief Shared helpers of the unit tests: seeded random data, index helpers, tolerant
 * comparison, expected user errors, DLTensor views of test vectors.
 */
#ifndef EXAMPLE_NPU_TESTS_CPP_TEST_UTIL_H_
#define EXAMPLE_NPU_TESTS_CPP_TEST_UTIL_H_

#include <dlpack/dlpack.h>
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace example_npu {
namespace kernels {
namespace test_util {

/*! \brief A DLTensor over caller-owned storage of any element type. */
template <typename T>
DLTensor ViewOf(std::vector<T>* data, std::vector<int64_t>* shape, DLDataType dtype) {
  DLTensor t{};
  t.data = data->data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape->size());
  t.dtype = dtype;
  t.shape = shape->data();
  return t;
}

/*! \brief Uniform random values in [lo, hi) from a caller-owned (seeded) generator. */
inline std::vector<float> RandomVector(int64_t n, std::mt19937* rng, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(*rng);
  return v;
}

inline std::string ShapeToString(const Shape& shape) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ")";
  return os.str();
}

/*! \brief Multi-index of flat offset `flat` in a row-major shape. */
inline std::vector<int64_t> Unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

/*! \brief Row-major flat offset of a multi-index. */
inline int64_t Ravel(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + index[i];
  return flat;
}

/*!
 * \brief Expects |actual - expected| <= atol + rtol * |expected| elementwise (numpy.allclose),
 * reporting at most a few mismatches so a broken kernel does not flood the log.
 */
inline void ExpectAllClose(const std::vector<float>& actual, const std::vector<double>& expected,
                           const std::string& context, double rtol = 1e-5, double atol = 1e-5) {
  ASSERT_EQ(actual.size(), expected.size()) << context;
  int reported = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double tol = atol + rtol * std::abs(expected[i]);
    if (std::abs(actual[i] - expected[i]) <= tol) continue;
    if (reported++ < 5) {
      ADD_FAILURE() << context << ": element " << i << " is " << actual[i] << ", expected "
                    << expected[i] << " (tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(reported, 0) << context << ": " << reported << " of " << actual.size()
                         << " elements differ";
}

inline void ExpectAllClose(const std::vector<float>& actual, const std::vector<float>& expected,
                           const std::string& context, double rtol = 1e-5, double atol = 1e-5) {
  ExpectAllClose(actual, std::vector<double>(expected.begin(), expected.end()), context, rtol,
                 atol);
}

/*! \brief Expects `fn` to throw a ValueError whose message contains `needle`. */
template <typename Fn>
void ExpectValueError(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error, expected one mentioning " << needle;
  } catch (const tvm::ffi::Error& err) {
    EXPECT_EQ(err.kind(), "ValueError");
    EXPECT_NE(std::string(err.message()).find(needle), std::string::npos) << err.message();
  }
}

}  // namespace test_util
}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_TESTS_CPP_TEST_UTIL_H_
