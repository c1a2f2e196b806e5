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
 * \brief One DMA transfer's data path, planned once: dims that are contiguous on both sides are
 * merged (dense boxes move as single block copies), a layout change (a dim contiguous only in
 * the source against one contiguous only in the destination) moves as block transposes, and
 * float32 results are narrowed to float16 / int8 / int16 on the way out.
 */
class BoxCopy {
 public:
  /*! \brief Copies nothing. */
  BoxCopy() = default;
  /*!
   * \brief Plans copying `extent[d]` elements along each dim, reading with `src_strides` and
   * writing with `dst_strides` (element strides, dims in the same order).
   */
  BoxCopy(DType src_type, const std::vector<int64_t>& src_strides, DType dst_type,
          const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& extent);

  void Run(const uint8_t* src, uint8_t* dst) const;

  /*! \brief Elements are copied as they are: no conversion and no transpose. */
  bool unchanged() const { return kind_ == Kind::kSameType; }
  /*! \brief The copy is a layout change, done as block transposes. */
  bool transposes() const { return kind_ == Kind::kTranspose; }
  /*! \brief Both sides are one dense run of the same element type: the copy is a memcpy. */
  bool contiguous() const {
    return kind_ == Kind::kSameType && dims_.size() == 1 && dims_[0].src_stride == 1 &&
           dims_[0].dst_stride == 1;
  }

  /*!
   * \brief Elements from the first element to one past the last one the copy reads (source) or
   * writes (destination), so callers can check a box against the buffer it addresses; 0 when
   * it copies nothing. Strides are never negative, so the first element is at offset 0.
   */
  int64_t SourceSpan() const { return Span(&Dim::src_stride); }
  int64_t DestinationSpan() const { return Span(&Dim::dst_stride); }

  struct Dim {
    int64_t extent;
    int64_t src_stride;
    int64_t dst_stride;
  };

 private:
  int64_t Span(int64_t Dim::* stride) const {
    if (kind_ == Kind::kEmpty) return 0;
    int64_t last = 0;
    for (const Dim& dim : dims_) last += (dim.extent - 1) * dim.*stride;
    return last + 1;
  }

  enum class Kind { kEmpty, kSameType, kTranspose, kNarrow };
  Kind kind_ = Kind::kEmpty;
  DType src_type_ = DType::kFloat32;
  DType dst_type_ = DType::kFloat32;
  // kTranspose: the source-contiguous dim, then the destination-contiguous one, innermost.
  std::vector<Dim> dims_;
};

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_DMA_H_
