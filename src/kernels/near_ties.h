/*!
 * \file kernels/near_ties.h
 * \brief The outputs of a QDQ matmul (Rounding::kTvm) where the NPU's exact rounding and TVM's
 * float32 build can part, and TVM's answer for them.
 *
 * The NPU rounds the exact integer sum once; TVM's build of the QDQ graph dequantizes, sums the
 * float32 products one after another and quantizes that sum. Float32's error is a few 1e-5 steps
 * (at most 3.4e-4 over 128 x 768 x 512 random int8 products with outputs spanning +-130 steps), so
 * the two agree except where the exact value lies that close to a .5 tie: then TVM's sum may land
 * on the other side (so may its float32 bias, where the NPU adds the bias rounded to accumulator
 * units). Such outputs (those within 2^-10 steps of a tie, about 0.2% of them, more where the bias
 * is rounded) are found from the exact sums and recomputed in TVM's float32 steps, which makes
 * the layer bit-equal to TVM's build: the contract of QDQ graphs, and what keeps a deep model (a
 * 12-layer BERT) from drifting. Convolutions keep the exact rounding (their near ties, thousands
 * of products each, cost as much as the layer).
 */
#ifndef EXAMPLE_NPU_KERNELS_NEAR_TIES_H_
#define EXAMPLE_NPU_KERNELS_NEAR_TIES_H_

#include <cstdint>
#include <vector>

#include "kernels/quantize.h"
#include "kernels/weight_pack_cache.h"

namespace example_npu {
namespace kernels {

/*! \brief How close to a tie, in output steps (2^-kNearTieBits), an exact value counts as near. */
constexpr int kNearTieBits = 10;

/*!
 * \brief How close to a tie an output of `channel` counts as near, in units of 2^-shift of its
 * multiplier: 2^-kNearTieBits steps, widened by how far the integer bias the NPU adds lies from
 * TVM's float32 bias (up to half an accumulator unit: the two values differ by that much).
 */
int64_t NearTieWindow(const Requantization& requant, int64_t channel);

/*!
 * \brief Whether `value` (acc + bias, exact) requantized by `m` lies within `window` (units of
 * 2^-m.shift) of a tie whose two integers (zero point added) are not both clamped by [min, max].
 */
bool NearTie(int64_t value, const FixedPointMultiplier& m, int64_t window, int64_t zero_point,
             int64_t min, int64_t max);

/*!
 * \brief Per channel of a requantization with float32 operands, a quick test every near tie
 * passes ((value m0 + 2^(shift-1) + window) mod 2^shift < 2 window, on int64 lanes for values
 * below 2^31) and NearTie for the few that pass it: built once, then run over rows of exact sums.
 */
class NearTieScan {
 public:
  NearTieScan() = default;
  /*! \brief Empty for a requantization without float32 operands; `requant` must outlive this. */
  NearTieScan(const Requantization& requant, int64_t channels);

  bool empty() const { return m0_.empty(); }
  /*! \brief Per channel, the integer bias the NPU adds (0 without one). */
  const int64_t* bias() const { return bias_.data(); }
  /*! \brief Per channel, NearTieWindow. */
  const int64_t* windows() const { return window_.data(); }

  /*!
   * \brief Appends first_index + j to `ties` for the channels j whose exact value, values[j] +
   * offsets[j] - row_term, lies near a tie. T: int32_t or int64_t.
   */
  template <typename T>
  void ScanRow(const T* values, const int64_t* offsets, int64_t row_term, int64_t first_index,
               std::vector<int64_t>* ties) const;

 private:
  const Requantization* requant_ = nullptr;
  std::vector<int64_t> m0_, nudge_, mask_, width_, window_, bias_;
};

/*!
 * \brief Appends to `ties` the flat indices (row * channels + channel) of acc[rows, channels]'s
 * outputs near a tie under `requant` (acc the exact sums, before the bias). Nothing for
 * requantizations without float32 operands.
 */
void FindNearTies(const int64_t* acc, int64_t rows, int64_t channels, const Requantization& requant,
                  std::vector<int64_t>* ties);

/*!
 * \brief TVM's results (zero point added, clamped) for the outputs `ties` names (flat indices row
 * * channels + channel) of a quantized matmul of x rows of `depth` activations by w[depth, ldw]
 * (the result's `channels` columns first): the float32 sum, in order of p, of
 * dequantize(x[row, p]) * dequantize(w[p, channel]), plus the float32 bias, quantized (round half
 * to even). `packs`: where a constant w's columns, laid out for this, are kept (nullptr: w
 * changes; its columns are read in place).
 */
template <typename T>
void Float32MatmulResults(const std::vector<int64_t>& ties, const T* x, int64_t x_zero_point,
                          const int8_t* w, int64_t ldw, int64_t w_zero_point, int64_t depth,
                          int64_t channels, const Requantization& requant,
                          std::vector<int64_t>* results, WeightPackCache* packs = nullptr);

/*! \brief out[pixel * pixel_stride + channel] = results[t] as `type` for each tie t. */
void StoreResults(const std::vector<int64_t>& ties, const std::vector<int64_t>& results,
                  int64_t channels, void* out, SumsType type, int64_t pixel_stride);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_NEAR_TIES_H_
