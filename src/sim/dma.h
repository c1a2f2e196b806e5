/*!
 * \file sim/dma.h
 * \brief The DMA engine's data path: N-D strided box copies with optional float32 -> float16
 * narrowing (the write-back conversion of float16 results).
 */
#ifndef EXAMPLE_NPU_SIM_DMA_H_
#define EXAMPLE_NPU_SIM_DMA_H_

#include <cstdint>
#include <vector>

#include "graph/op.h"

namespace example_npu {

/*!
 * \brief Copies `extent[d]` elements along each dim, reading `src` with `src_strides` and
 * writing `dst` with `dst_strides` (element strides, dims in the same order). Dims that are
 * contiguous on both sides are merged first, so dense boxes move as single block copies.
 */
void CopyBox(const uint8_t* src, DType src_type, const std::vector<int64_t>& src_strides,
             uint8_t* dst, DType dst_type, const std::vector<int64_t>& dst_strides,
             const std::vector<int64_t>& extent);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_DMA_H_
