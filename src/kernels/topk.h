/*!
 * \file kernels/topk.h
 * \brief topk: the k largest (or smallest) elements of every row along one axis, in order, and
 * their indices, as TVM's CPU build (contrib sort's topk) gives them: ordered by value, equal
 * values by the lower index first, for largest and smallest alike.
 */
#ifndef EXAMPLE_NPU_KERNELS_TOPK_H_
#define EXAMPLE_NPU_KERNELS_TOPK_H_

#include <cstdint>

#include "kernels/kernels.h"

namespace example_npu {
namespace kernels {

struct TopkParams {
  int64_t axis = -1;  // normalised to [0, rank) at load
  int64_t k = 1;      // 1 <= k <= the axis extent
  bool largest = true;
  /*! \brief Which result the node stores: the selected values, or their indices (as floats,
   * exact below 2^24, stored to int32 / int64 by the DMA). */
  bool indices = false;
};

/*!
 * \brief out has `shape` with the axis extent k. A partial selection: each row keeps a k-slot
 * ordered list and each element enters it only if it beats the last slot (an insertion network
 * of k compare-exchange stages), so rows cost n * k compares at most, not a sort. Elements
 * arrive in index order and enter only on strictly better values, which breaks ties by the
 * lower index. A NaN never beats a slot (TVM's heap places it by its own insertion order).
 */
void Topk(const float* input, const Shape& shape, const TopkParams& params, float* out);

/*!
 * \brief One chunk of a row too long for L1 (the NPU streams it): the chunk's elements, numbered
 * from `index_offset` along the axis, enter the running list of each row, which `running` holds
 * with the chunk's shape but the axis extent 2k: the k values so far, then their indices. The
 * first chunk (`continuing` false) starts an empty list and must hold at least k elements; later
 * ones continue it. Chunks fed in index order give exactly Topk's selection.
 */
void TopkSelect(const float* chunk, const Shape& chunk_shape, const TopkParams& params,
                int64_t index_offset, bool continuing, float* running);

/*! \brief The values or indices (params.indices) of a running list of shape `running_shape`. */
void TopkEmit(const float* running, const Shape& running_shape, const TopkParams& params,
              float* out);

/*!
 * \brief The vector element-operations of feeding elements [first, first + count) of a row into
 * its list, for the cycle model (which sees no data): each element is compared with the k-th
 * entry (the list's threshold, lanes across elements), and an element that enters shifts the
 * list (k lanes). In a row of random order element i enters with probability min(1, k / (i + 1)),
 * so the entries up to i are about k (1 + ln(i / k)); an adversarial order (every element
 * entering) costs up to count * (k + 1).
 */
int64_t TopkSelectionWork(int64_t first, int64_t count, int64_t k);

/*! \brief The naive form: a stable sort of each whole row, then its first k (tests only). */
void TopkReference(const float* input, const Shape& shape, const TopkParams& params, float* out);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_TOPK_H_
