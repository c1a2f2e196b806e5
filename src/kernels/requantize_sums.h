/*!
 * \file kernels/requantize_sums.h
 * \brief The requantization step fused into the integer kernels: their exact int32 sums go
 * straight to the output integers instead of through a tile of int64 accumulators.
 *
 * On the NPU a quantized layer's tile is two commands, the matrix engine's accumulation and the
 * vector unit's requantization (compiler/command_stream.h, ComputeStep). The emulator computes
 * both at once where nothing else reads the accumulators (sim/fused_requantization.h): the
 * numbers are those of Requantize over the accumulators, bit for bit, and the cycle model still
 * counts both commands (it reads the command stream, not this).
 */
#ifndef EXAMPLE_NPU_KERNELS_REQUANTIZE_SUMS_H_
#define EXAMPLE_NPU_KERNELS_REQUANTIZE_SUMS_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/near_ties.h"
#include "kernels/quantize.h"

namespace example_npu {
namespace kernels {

/*!
 * \brief A tile's requantization with its per-channel parameters laid out as the lanes read them,
 * built once (the emulator prepares every fused requantization when it plans the program), then
 * applied to rows of int32 sums, each row one pixel's `channels` channels. TFLite's double
 * rounding runs on int32 lanes (sixteen to an AVX-512 vector; elsewhere loops the compiler
 * vectorises), the single rounding of TFLite's FULLY_CONNECTED and TVM's exact rounding on eight
 * int64 lanes (TVM's for sums below 2^31, wider ones as RequantizeElementwise rounds them); the
 * rest, and those two on CPUs without AVX-512 DQ, go through RequantizeElementwise.
 */
class PreparedRequantization {
 public:
  /*! \brief `requant` must outlive this. */
  PreparedRequantization(const Requantization& requant, int64_t channels);

  /*!
   * \brief out[i * ld_out + j] = requantized(sums[i * ld_sums + j] - row_terms[i] - correction *
   * column_sums[j]) as `out_type`, for rows i and channels j (row_terms, column_sums nullptr:
   * zero), the value requantized being the exact sum an int64 accumulator would hold. Safe from
   * several threads.
   */
  void Run(const int32_t* sums, int64_t ld_sums, const int64_t* row_terms,
           const int32_t* column_sums, int64_t correction, int64_t rows, void* out, int64_t ld_out,
           SumsType out_type) const;

  /*!
   * \brief Appends to `ties` the flat indices ((first_pixel + i) * channels + j) of the outputs
   * Run gives from the same arguments whose exact value lies near a rounding tie
   * (kernels/near_ties.h); nothing for requantizations without float32 operands.
   */
  void FindNearTies(const int32_t* sums, int64_t ld_sums, const int64_t* row_terms,
                    const int32_t* column_sums, int64_t correction, int64_t rows,
                    int64_t first_pixel, std::vector<int64_t>* ties) const;

  /*! \brief Run, then FindNearTies on the same arguments: one pass over the sums where the
   * requantization's int32 lanes take them (a QDQ matmul's single rounding on AVX-512). */
  void RunFindingNearTies(const int32_t* sums, int64_t ld_sums, const int64_t* row_terms,
                          const int32_t* column_sums, int64_t correction, int64_t rows, void* out,
                          int64_t ld_out, SumsType out_type, int64_t first_pixel,
                          std::vector<int64_t>* ties) const;

  const Requantization& requantization() const { return requant_; }
  int64_t channels() const { return channels_; }

 private:
  enum class Lanes { kInt32, kInt64, kElementwise };
  /*! \brief Run, appending near ties to `ties` as FindNearTies when it is not null (int32 lanes
   * of the single rounding only: RunFindingNearTies checks). */
  void Requantized(const int32_t* sums, int64_t ld_sums, const int64_t* row_terms,
                   const int32_t* column_sums, int64_t correction, int64_t rows, void* out,
                   int64_t ld_out, SumsType out_type, int64_t first_pixel,
                   std::vector<int64_t>* ties) const;
  void RunElementwise(const int32_t* sums, int64_t row_term, const int32_t* column_sums,
                      int64_t correction, void* out, SumsType out_type) const;

  const Requantization& requant_;
  int64_t channels_;
  Lanes lanes_ = Lanes::kElementwise;
  // kInt32: low 32 bits of the bias, the multipliers' m0 and left / right shifts, and whether
  // any channel shifts left. kInt64 on int32 lanes: the bias where every |bias| < 2^28.
  std::vector<int32_t> bias32_, m0_32_, left_, right_;
  bool left_shifts_ = false;
  // kInt32 without left shifts, on AVX-512: EstimatedRounding16's scale and sure bound per channel.
  std::vector<float> estimate_scales_, estimate_sure_below_;
  // Every estimate scale at most 1/2: |x s + zero point| < 2^31 for any int32 x, so an int8
  // output of the full range [-128, 127] takes the estimate unclamped and a saturating store.
  bool estimate_saturates_ = false;
  // Each block of sixteen channels' rounded products on int32 lanes (requantize.cc,
  // RoundedProduct16): kInt32's double rounding; kInt64's single rounding where every multiplier
  // and the output range fit them, with the largest |value| each block takes there.
  std::vector<int64_t> products_, value_limits_;
  // kInt64: bias, m0, shift and rounding bit.
  std::vector<int64_t> bias64_, m0_64_, shift_, rounding_;
  // Requantizations with float32 operands only; near_words_: NearTieLanes16 per block of
  // products_ (kInt64 on int32 lanes).
  NearTieScan near_;
  std::vector<int64_t> near_words_;
};

/*!
 * \brief Sums of `size` outputs (channels innermost) computed as int64 by `compute(acc,
 * accumulate)`, then put where `to` says: for kernel paths without a fused requantization, the
 * accumulators go through this thread's scratch and Requantize.
 */
template <typename Compute>
void ViaAccumulators(const SumsOut& to, int64_t size, int64_t channels, Compute compute) {
  if (to.requant == nullptr) {
    compute(to.acc, to.accumulate);
    return;
  }
  thread_local std::vector<int64_t> scratch;
  if (scratch.size() < static_cast<size_t>(size)) scratch.resize(static_cast<size_t>(size));
  compute(scratch.data(), false);
  if (to.near_ties != nullptr) {
    FindNearTies(scratch.data(), size / std::max<int64_t>(channels, 1), channels,
                 to.requant->requantization(), to.near_ties);
  }
  if (to.out_type == SumsType::kFloat32 && to.PixelStride(channels) == channels) {
    Requantize(scratch.data(), size, channels, 0, to.requant->requantization(),
               static_cast<float*>(to.out));
    return;
  }
  thread_local std::vector<float> values;
  values.resize(static_cast<size_t>(size));
  Requantize(scratch.data(), size, channels, 0, to.requant->requantization(), values.data());
  StoreRequantized(values.data(), size / std::max<int64_t>(channels, 1), channels, to.out_type,
                   to.out, to.PixelStride(channels));
}

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_REQUANTIZE_SUMS_H_
