/*!
 * \file kernels/window.h
 * \brief Sliding-window arithmetic shared by convolution, pooling and graph shape inference.
 */
#ifndef EXAMPLE_NPU_KERNELS_WINDOW_H_
#define EXAMPLE_NPU_KERNELS_WINDOW_H_

#include <algorithm>
#include <cstdint>

namespace example_npu {
namespace kernels {

/*! \brief Half-open index range [begin, end). */
struct Range {
  int64_t begin;
  int64_t end;
};

/*!
 * \brief The indices i in [0, count) for which offset + i * step lies in [0, extent). Clipping
 * loops to this range replaces a bounds test per tap with implicit zero padding.
 */
inline Range ValidRange(int64_t offset, int64_t step, int64_t extent, int64_t count) {
  const int64_t begin = offset >= 0 ? 0 : (-offset + step - 1) / step;
  const int64_t last = extent - 1 - offset;
  const int64_t end = last < 0 ? 0 : std::min(count, last / step + 1);
  return {std::min(begin, end), end};
}

/*!
 * \brief Output extent of a window of `kernel` taps (dilated) sliding with `stride` over `extent`
 * padded by pad_lo/pad_hi; 0 when the window does not fit. ceil_mode (pooling) rounds up but, as
 * in TVM, drops a last window that would start beyond the user-padded input, unless
 * `drop_trailing` is false (a tile of a larger pooling: its last window is not the tensor's).
 */
inline int64_t WindowOutputSize(int64_t extent, int64_t kernel, int64_t stride, int64_t dilation,
                                int64_t pad_lo, int64_t pad_hi, bool ceil_mode = false,
                                bool drop_trailing = true) {
  int64_t span = extent + pad_lo + pad_hi - (kernel - 1) * dilation - 1;
  if (ceil_mode) span += stride - 1;
  if (span < 0) return 0;
  int64_t out = span / stride + 1;
  if (ceil_mode && drop_trailing && (out - 1) * stride >= extent + pad_lo) --out;
  return out;
}

/*! \brief a + b for non-negative sizes, saturating at INT64_MAX (for comparing sizes only). */
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

/*! \brief a * b for non-negative sizes, saturating at INT64_MAX (for comparing sizes only). */
inline int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? INT64_MAX : product;
}

/*!
 * \brief Whether a window kernel may copy its `in_h` x `in_w` input into a padded buffer of
 * `buffer_h` x `buffer_w` positions (per channel): only when the buffer is no larger than what
 * the kernel reads anyway, the input plus one position per output and tap. Padding, strides and
 * dilation are valid up to 2^31 each, so a buffer sized by them could need gigabytes (or
 * overflow the size arithmetic) for a tile of a few outputs; such tiles take the kernels'
 * bounds-tested paths, which allocate nothing in proportion to the padding.
 */
inline bool PaddedCopyFits(int64_t buffer_h, int64_t buffer_w, int64_t in_h, int64_t in_w,
                           int64_t out_positions, int64_t taps) {
  const int64_t buffer = SaturatingMul(buffer_h, buffer_w);
  return buffer < INT64_MAX &&
         buffer <= SaturatingAdd(SaturatingMul(in_h, in_w), SaturatingMul(out_positions, taps));
}

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_WINDOW_H_
