/*!
 * \file kernels/kernels.h
 * \brief Float32 compute kernels of the NPU engines (matrix, vector, pooling, activation units).
 *
 * Kernels work on dense, row-major, contiguous float32 buffers. Shapes are validated by the graph
 * stage before any kernel runs, so kernels assume consistent shapes (they still check invariants
 * with TVM_FFI_ICHECK where a mistake would write out of bounds). Each kernel has a naive
 * reference in tests/cpp that it is tested against.
 */
#ifndef EXAMPLE_NPU_KERNELS_KERNELS_H_
#define EXAMPLE_NPU_KERNELS_KERNELS_H_

#include <array>
#include <cstdint>
#include <limits>
#include <vector>

namespace example_npu {
namespace kernels {

using Shape = std::vector<int64_t>;

/*! \brief Number of elements of a shape (1 for a scalar). */
int64_t NumElements(const Shape& shape);

/*! \brief Row-major (dense) strides of a shape, in elements. */
std::vector<int64_t> RowMajorStrides(const Shape& shape);

/*!
 * \brief numpy.matmul semantics: rank >= 1 operands; leading (batch) dims broadcast; a 1-D lhs is
 * a row vector and a 1-D rhs a column vector (the added dim is dropped from the output).
 */
void Matmul(const float* lhs, const Shape& lhs_shape, const float* rhs, const Shape& rhs_shape,
            float* out, const Shape& out_shape);

/*!
 * \brief Whether Matmul computes a dense [m, k] x [k, n] product as MatmulRows does: register
 * tiles on the operands in place, each output one multiply-add chain over k in order.
 */
bool MatmulRowsApply(int64_t m, int64_t k, int64_t n);

/*!
 * \brief out[i, 0:n] (+)= lhs[i, 0:k] x rhs for i < m, row i of lhs at lhs + i * lda, of rhs at
 * rhs + i * ldb and of out at out + i * ldo: the bits Matmul computes for the dense product
 * wherever MatmulRowsApply(m, k, n), a tile read from and written into wider matrices. With
 * `accumulate` each output is its old value plus that product, as adding a partial product's
 * tile.
 */
void MatmulRows(const float* lhs, int64_t lda, const float* rhs, int64_t ldb, int64_t m, int64_t k,
                int64_t n, float* out, int64_t ldo, bool accumulate);

/*! \brief Feature-map layouts of convolution and pooling. */
enum class DataLayout { kNCHW, kNHWC };
/*! \brief Convolution weight layouts: OIHW goes with NCHW, HWIO with NHWC (any mix is allowed). */
enum class KernelLayout { kOIHW, kHWIO };

/*! \brief Attributes of a 2-D convolution; padding is {top, left, bottom, right}. */
struct Conv2dParams {
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 4> padding{0, 0, 0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  DataLayout data_layout = DataLayout::kNCHW;
  KernelLayout kernel_layout = KernelLayout::kOIHW;
};

/*!
 * \brief Grouped, dilated, strided, zero-padded 2-D convolution (cross-correlation, as in TVM).
 * in_shape is 4-D in data_layout; weight_shape is 4-D in kernel_layout with I = C_in / groups;
 * out_shape is 4-D in data_layout.
 */
void Conv2d(const float* input, const Shape& in_shape, const float* weight,
            const Shape& weight_shape, float* out, const Shape& out_shape,
            const Conv2dParams& params);

/*! \brief Element strides of an NHWC view whose channels are contiguous. */
struct PixelStrides {
  int64_t batch;
  int64_t row;
  int64_t pixel;
};

/*! \brief The strides of a dense NHWC tensor of shape `nhwc`. */
inline PixelStrides DensePixelStrides(const Shape& nhwc) {
  return PixelStrides{nhwc[1] * nhwc[2] * nhwc[3], nhwc[2] * nhwc[3], nhwc[3]};
}

/*! \brief Whether Conv2d with these shapes is a depthwise NHWC / HWIO convolution. */
bool IsDepthwiseNhwc(const Shape& in_shape, const Shape& weight_shape, const Conv2dParams& params);

/*!
 * \brief A depthwise NHWC / HWIO convolution (IsDepthwiseNhwc) that reads its input and writes
 * its output through pixel strides: how the vector engine consumes a tile where it lies in
 * DRAM. Equal to Conv2d on dense copies of the same views.
 */
void DepthwiseConvStrided(const float* input, const Shape& in_shape, const PixelStrides& in_strides,
                          const float* weight, const Shape& weight_shape, float* out,
                          const Shape& out_shape, const PixelStrides& out_strides,
                          const Conv2dParams& params);

enum class PoolKind { kMax, kAvg };

/*! \brief Attributes of 2-D pooling; padding is {top, left, bottom, right}. */
struct Pool2dParams {
  PoolKind kind = PoolKind::kMax;
  std::array<int64_t, 2> pool_size{1, 1};
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 2> dilation{1, 1};
  std::array<int64_t, 4> padding{0, 0, 0, 0};
  bool ceil_mode = false;
  /*! \brief ceil_mode drops a last window that starts beyond the padded input (TVM's rule);
   * false for a tile of a larger pooling, whose last window is not the tensor's. */
  bool drop_trailing_window = true;
  /*! \brief Average pooling divides by the full window (padding included) when true. */
  bool count_include_pad = false;
  DataLayout layout = DataLayout::kNCHW;
  /*!
   * \brief Max pooling's start and padding value: the lowest finite value of the tensor's dtype
   * (float16: -65504), as TVM pads and starts its reduction. Not -inf: TVM's max of an all -inf
   * window, or of a window wholly in the padding, is this value.
   */
  float lowest = std::numeric_limits<float>::lowest();
};

/*!
 * \brief Max / average 2-D pooling with TVM's semantics: padded positions are ignored by max
 * pooling; average pooling divides by the number of in-bounds taps unless count_include_pad.
 * With ceil_mode, windows that start inside the padded input but run past it are clipped.
 */
void Pool2d(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
            const Pool2dParams& params);

/*!
 * \brief Numerically stable softmax along axis (0 <= axis < rank). With zero_masked_rows, a row
 * whose every element is -inf gives zeros (PyTorch's safe softmax) instead of NaN; with
 * zero_nan, every NaN of the result is 0 (the ONNX exporter's where(isnan(s), 0, s) guard).
 */
void Softmax(const float* input, const Shape& shape, int64_t axis, float* out,
             bool zero_masked_rows = false, bool zero_nan = false);

enum class UnaryOp {
  kRelu,
  kClip,
  kSigmoid,
  kTanh,
  kGelu,
  kGeluTanh,
  kSqrt,
  kRsqrt,
  kExp,
  kLog,
  kErf,
  kAbs,
  kNegative,
  kRound,
  kFloor,
  kCeil,
};

/*!
 * \brief Elementwise activation. kClip clamps to [clip_min, clip_max]; kGelu is the erf form
 * 0.5 x (1 + erf(x / sqrt 2)); kGeluTanh is 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 * kSqrt, kExp, kLog and kErf are the C library's sqrtf / expf / logf / erff, which TVM's LLVM
 * build calls too (bit for bit, NaN and infinities included); kRsqrt is 1 / sqrtf(x), as TVM
 * lowers rsqrt. kRound rounds half to even (TVM's round is nearbyint), kFloor / kCeil as
 * floorf / ceilf.
 */
void Unary(UnaryOp op, const float* input, float* out, int64_t size, float clip_min = 0.0f,
           float clip_max = 0.0f);

enum class BinaryOp {
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kMaximum,
  kMinimum,
  kPower,
  kPrelu,
  kGreater,
  kGreaterEqual,
  kLess,
  kLessEqual,
  kEqual,
  kNotEqual,
};

/*!
 * \brief Elementwise binary op with numpy broadcasting of lhs_shape and rhs_shape to out_shape.
 * kMaximum is a > b ? a : b and kMinimum a < b ? a : b, as TVM's LLVM build computes them: a NaN
 * lhs gives the rhs, a NaN rhs gives NaN. kPower is the C library's powf, as in TVM's build.
 * kPrelu is a > 0 ? a : a * b (PReLU with slope b; leaky ReLU with a scalar slope), as TVM's topi.
 * The comparisons give 1.0f where true and 0.0f where false (the NPU carries a condition as a
 * float mask); they are ordered, as TVM's LLVM build compares: a NaN operand makes every one of
 * them false, kNotEqual included (unlike C++'s !=).
 */
void Binary(BinaryOp op, const float* lhs, const Shape& lhs_shape, const float* rhs,
            const Shape& rhs_shape, float* out, const Shape& out_shape);

/*!
 * \brief Elementwise select with numpy broadcasting of the three shapes to out_shape:
 * out = cond != 0 ? x : y. Only the selected element is read into the output, so a NaN or an
 * infinity in the other one never shows (relax.where, as TVM's build computes it).
 */
void Where(const float* cond, const Shape& cond_shape, const float* x, const Shape& x_shape,
           const float* y, const Shape& y_shape, float* out, const Shape& out_shape);

/*!
 * \brief Inference batch normalisation along axis:
 * out = (x - mean) / sqrt(var + epsilon) * (scale ? gamma : 1) + (center ? beta : 0).
 * gamma, beta, mean, var each hold shape[axis] values.
 */
void BatchNorm(const float* input, const Shape& shape, int64_t axis, const float* gamma,
               const float* beta, const float* mean, const float* var, float epsilon, bool center,
               bool scale, float* out);

/*!
 * \brief Mean over `axes` (sorted, distinct): out has `shape` with those dims set to 1 (row
 * major). Each output sums its elements in row-major order, then divides by their count, as
 * TVM's sum / count does.
 */
void Mean(const float* input, const Shape& shape, const std::vector<int64_t>& axes, float* out);

/*!
 * \brief Layer normalisation over the dims from first_axis on (two passes, as TVM's topi):
 * out = (x - mean) / sqrt(var + epsilon) * (scale ? gamma : 1) + (center ? beta : 0), with
 * mean and the biased variance per row of the trailing dims; gamma and beta hold one row.
 */
void LayerNorm(const float* input, const Shape& shape, int64_t first_axis, const float* gamma,
               const float* beta, float epsilon, bool center, bool scale, float* out);

/*! \brief out = input permuted by axes (numpy.transpose); out has shape in_shape[axes[i]]. */
void Transpose(const float* input, const Shape& in_shape, const std::vector<int64_t>& axes,
               float* out);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_KERNELS_H_
