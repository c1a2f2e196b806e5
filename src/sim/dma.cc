#include "sim/dma.h"

#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/half.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace example_npu {
namespace {

using Dim = BoxCopy::Dim;

// Coalesced boxes of up to this many dims are walked without allocating.
constexpr size_t kMaxDims = 16;

/*! \brief Drops unit dims and merges a dim into the next inner one when both sides are dense. */
std::vector<Dim> Coalesce(const std::vector<int64_t>& extent,
                          const std::vector<int64_t>& src_strides,
                          const std::vector<int64_t>& dst_strides) {
  std::vector<Dim> dims;
  for (size_t d = 0; d < extent.size(); ++d) {
    if (extent[d] != 1) dims.push_back(Dim{extent[d], src_strides[d], dst_strides[d]});
  }
  std::vector<Dim> merged;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    if (!merged.empty()) {
      Dim& inner = merged.back();
      if (it->src_stride == inner.src_stride * inner.extent &&
          it->dst_stride == inner.dst_stride * inner.extent) {
        inner.extent *= it->extent;
        continue;
      }
    }
    merged.push_back(*it);
  }
  if (merged.empty()) merged.push_back(Dim{1, 1, 1});
  return std::vector<Dim>(merged.rbegin(), merged.rend());
}

template <typename T>
EXAMPLE_NPU_INLINE void CopyRow(const uint8_t* src, int64_t src_stride, uint8_t* dst,
                                int64_t dst_stride, int64_t n) {
  if (src_stride == 1 && dst_stride == 1) {
    // Short rows (a pixel's channels in an NHWC tile) are cheaper inline than a library call.
    constexpr int64_t kInlineBytes = 128;
    const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
    if (bytes <= kInlineBytes) {
      // 16-byte moves, the last one overlapping the previous (or byte moves below 16).
      if (bytes >= 16) {
        for (int64_t i = 0; i + 16 < bytes; i += 16) std::memcpy(dst + i, src + i, 16);
        std::memcpy(dst + bytes - 16, src + bytes - 16, 16);
      } else {
        for (int64_t i = 0; i < bytes; ++i) dst[i] = src[i];
      }
    } else {
      std::memcpy(dst, src, n * sizeof(T));
    }
    return;
  }
  const T* s = reinterpret_cast<const T*>(src);
  T* t = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) t[i * dst_stride] = s[i * src_stride];
}

void NarrowRow(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
               int64_t n) {
  const float* s = reinterpret_cast<const float*>(src);
  uint16_t* t = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) t[i * dst_stride] = kernels::FloatToHalf(s[i * src_stride]);
}

/*! \brief Stores float32 tiles holding exact integers (quantized results) as int8 / uint8 / int16.
 */
template <typename T>
void NarrowToIntRow(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
                    int64_t n) {
  const float* s = reinterpret_cast<const float*>(src);
  T* t = reinterpret_cast<T*>(dst);
  if (src_stride == 1 && dst_stride == 1) {
    for (int64_t i = 0; i < n; ++i) t[i] = static_cast<T>(s[i]);  // vectorises
    return;
  }
  for (int64_t i = 0; i < n; ++i) t[i * dst_stride] = static_cast<T>(s[i * src_stride]);
}

using RowCopy = void (*)(const uint8_t*, int64_t, uint8_t*, int64_t, int64_t);

RowCopy SelectNarrowing(DType src_type, DType dst_type) {
  if (src_type == DType::kFloat32 && dst_type == DType::kFloat16) return NarrowRow;
  if (src_type == DType::kFloat32 && dst_type == DType::kInt8) return NarrowToIntRow<int8_t>;
  if (src_type == DType::kFloat32 && dst_type == DType::kUInt8) return NarrowToIntRow<uint8_t>;
  if (src_type == DType::kFloat32 && dst_type == DType::kInt16) return NarrowToIntRow<int16_t>;
  // argmax / argmin and topk indices (exact in float32 below 2^24).
  if (src_type == DType::kFloat32 && dst_type == DType::kInt64) return NarrowToIntRow<int64_t>;
  if (src_type == DType::kFloat32 && dst_type == DType::kInt32) return NarrowToIntRow<int32_t>;
  TVM_FFI_THROW(InternalError) << "DMA cannot convert " << DTypeName(src_type) << " to "
                               << DTypeName(dst_type);
  TVM_FFI_UNREACHABLE();
}

/*! \brief dst[r * dst_row + c] = src[c * src_col + r] for an 8 x 8 block. */
template <typename T>
EXAMPLE_NPU_INLINE void Transpose8x8(const T* src, int64_t src_col, T* dst, int64_t dst_row) {
  for (int r = 0; r < 8; ++r) {
    for (int c = 0; c < 8; ++c) dst[r * dst_row + c] = src[c * src_col + r];
  }
}

#if defined(__AVX__)
/*! \brief The 32-bit case in registers: eight loads, three rounds of shuffles, eight stores. */
template <>
EXAMPLE_NPU_INLINE void Transpose8x8(const uint32_t* src, int64_t src_col, uint32_t* dst,
                                     int64_t dst_row) {
  __m256 r[8], t[8];
  for (int c = 0; c < 8; ++c) {
    r[c] = _mm256_loadu_ps(reinterpret_cast<const float*>(src + c * src_col));
  }
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  for (int row = 0; row < 8; ++row) {
    _mm256_storeu_ps(reinterpret_cast<float*>(dst + row * dst_row), t[row]);
  }
}
#endif

#if defined(__SSE2__)
/*! \brief The 8-bit case in registers: eight 8-byte loads, three rounds of unpacks. */
template <>
EXAMPLE_NPU_INLINE void Transpose8x8(const uint8_t* src, int64_t src_col, uint8_t* dst,
                                     int64_t dst_row) {
  __m128i r[8];
  for (int c = 0; c < 8; ++c) {
    r[c] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + c * src_col));
  }
  // Bytes of columns (0, 1), (2, 3), ... interleaved, then 16-bit pairs, then 32-bit quads.
  const __m128i b01 = _mm_unpacklo_epi8(r[0], r[1]), b23 = _mm_unpacklo_epi8(r[2], r[3]);
  const __m128i b45 = _mm_unpacklo_epi8(r[4], r[5]), b67 = _mm_unpacklo_epi8(r[6], r[7]);
  const __m128i w0 = _mm_unpacklo_epi16(b01, b23), w1 = _mm_unpackhi_epi16(b01, b23);
  const __m128i w2 = _mm_unpacklo_epi16(b45, b67), w3 = _mm_unpackhi_epi16(b45, b67);
  const __m128i q[4] = {_mm_unpacklo_epi32(w0, w2), _mm_unpackhi_epi32(w0, w2),
                        _mm_unpacklo_epi32(w1, w3), _mm_unpackhi_epi32(w1, w3)};
  for (int i = 0; i < 4; ++i) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * i) * dst_row), q[i]);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * i + 1) * dst_row),
                     _mm_unpackhi_epi64(q[i], q[i]));
  }
}
#endif

/*!
 * \brief Transposes an n_rows x n_cols block: dst[r * dst_row + c] = src[c * src_col + r], both
 * inner strides 1. Goes 8 x 8 at a time so every load and store touches whole cache lines,
 * where the element-by-element gather of CopyRow would touch a new line for every element.
 */
template <typename T>
void TransposeBlock(const T* src, int64_t src_col, T* dst, int64_t dst_row, int64_t n_rows,
                    int64_t n_cols) {
  constexpr int64_t kBlock = 8;
  if (n_rows < kBlock || n_cols < kBlock) {
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t c = 0; c < n_cols; ++c) dst[r * dst_row + c] = src[c * src_col + r];
    }
    return;
  }
  // Ragged edges take one more block flush with the edge, overlapping the previous one (the
  // overlap is written twice with the same values): a 9-row weight tap dim is two blocks, not a
  // block and a row of single elements.
  for (int64_t c0 = 0; c0 < n_cols; c0 += kBlock) {
    const int64_t c = std::min(c0, n_cols - kBlock);
    for (int64_t r0 = 0; r0 < n_rows; r0 += kBlock) {
      const int64_t r = std::min(r0, n_rows - kBlock);
      Transpose8x8(src + c * src_col + r, src_col, dst + r * dst_row + c, dst_row);
    }
  }
}

/*!
 * \brief Visits rows [begin, end) of the outer dims (all but the last `inner_rank`), passing
 * the element offsets of each on both sides. The last outer dim is a plain loop and the others
 * advance as an odometer, so there is no division per row.
 */
template <typename Fn>
void ForEachOuter(const std::vector<Dim>& dims, size_t inner_rank, int64_t begin, int64_t end,
                  const Fn& fn) {
  const int64_t outer = static_cast<int64_t>(dims.size() - inner_rank);
  if (outer == 0) {
    fn(0, 0);
    return;
  }
  int64_t index[kMaxDims] = {};
  int64_t src_off = 0, dst_off = 0;
  for (int64_t d = outer - 1, rest = begin; d >= 0; --d) {
    index[d] = rest % dims[d].extent;
    rest /= dims[d].extent;
    src_off += index[d] * dims[d].src_stride;
    dst_off += index[d] * dims[d].dst_stride;
  }
  const Dim& last = dims[outer - 1];
  for (int64_t row = begin; row < end;) {
    // A run along the last outer dim, then one odometer step of the dims above it.
    const int64_t run = std::min(last.extent - index[outer - 1], end - row);
    for (int64_t j = 0; j < run; ++j) {
      fn(src_off + j * last.src_stride, dst_off + j * last.dst_stride);
    }
    row += run;
    src_off += (last.extent - index[outer - 1]) * last.src_stride - last.extent * last.src_stride;
    dst_off += (last.extent - index[outer - 1]) * last.dst_stride - last.extent * last.dst_stride;
    index[outer - 1] = 0;
    for (int64_t d = outer - 2; d >= 0; --d) {
      src_off += dims[d].src_stride;
      dst_off += dims[d].dst_stride;
      if (++index[d] < dims[d].extent) break;
      src_off -= dims[d].extent * dims[d].src_stride;
      dst_off -= dims[d].extent * dims[d].dst_stride;
      index[d] = 0;
    }
  }
}

/*! \brief Rows of the outer dims, split over the thread pool when the box is large. */
template <typename Fn>
void ForRows(const std::vector<Dim>& dims, size_t inner_rank, const Fn& fn) {
  int64_t rows = 1, row_elements = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    (d + inner_rank < dims.size() ? rows : row_elements) *= dims[d].extent;
  }
  constexpr int64_t kParallelElements = 1 << 16;
  if (rows < 2 || rows * row_elements < kParallelElements) {
    ForEachOuter(dims, inner_rank, 0, rows, fn);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / row_elements);
  kernels::ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    ForEachOuter(dims, inner_rank, begin, end, fn);
  });
}

/*!
 * \brief For a layout change such as NCHW <-> NHWC, `dims` reordered so that the dim with unit
 * stride only in the source and the dim with unit stride only in the destination are innermost,
 * in that order. Empty when the box is not such a transpose.
 */
std::vector<Dim> TransposeOrder(const std::vector<Dim>& dims) {
  int64_t src_unit = -1, dst_unit = -1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].src_stride == 1 && dims[d].dst_stride != 1) src_unit = d;
    if (dims[d].dst_stride == 1 && dims[d].src_stride != 1) dst_unit = d;
  }
  if (src_unit < 0 || dst_unit < 0) return {};
  std::vector<Dim> order;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (d != src_unit && d != dst_unit) order.push_back(dims[d]);
  }
  order.push_back(dims[src_unit]);
  order.push_back(dims[dst_unit]);
  return order;
}

template <typename T>
void TransposeBox(const uint8_t* src, uint8_t* dst, const std::vector<Dim>& dims) {
  const Dim& rows = dims[dims.size() - 2];
  const Dim& cols = dims.back();
  ForRows(dims, 2, [&](int64_t src_off, int64_t dst_off) {
    TransposeBlock(reinterpret_cast<const T*>(src) + src_off, cols.src_stride,
                   reinterpret_cast<T*>(dst) + dst_off, rows.dst_stride, rows.extent, cols.extent);
  });
}

/*! \brief Same-type boxes: the row copy is inlined into the walk over rows. */
template <typename T>
void CopySameType(const uint8_t* src, uint8_t* dst, const std::vector<Dim>& dims) {
  const Dim& inner = dims.back();
  ForRows(dims, 1, [&](int64_t src_off, int64_t dst_off) {
    CopyRow<T>(src + src_off * sizeof(T), inner.src_stride, dst + dst_off * sizeof(T),
               inner.dst_stride, inner.extent);
  });
}

}  // namespace

BoxCopy::BoxCopy(DType src_type, const std::vector<int64_t>& src_strides, DType dst_type,
                 const std::vector<int64_t>& dst_strides, const std::vector<int64_t>& extent)
    : src_type_(src_type), dst_type_(dst_type) {
  for (int64_t e : extent) {
    if (e == 0) return;  // kEmpty
  }
  dims_ = Coalesce(extent, src_strides, dst_strides);
  TVM_FFI_ICHECK_LE(dims_.size(), kMaxDims) << "DMA box of " << dims_.size() << " dims";
  if (src_type != dst_type) {
    SelectNarrowing(src_type, dst_type);  // rejects conversions the DMA cannot do
    kind_ = Kind::kNarrow;
    return;
  }
  std::vector<Dim> transposed = TransposeOrder(dims_);
  if (!transposed.empty()) {
    dims_ = std::move(transposed);
    kind_ = Kind::kTranspose;
    return;
  }
  kind_ = Kind::kSameType;
}

void BoxCopy::Run(const uint8_t* src, uint8_t* dst) const {
  switch (kind_) {
    case Kind::kEmpty:
      return;
    case Kind::kTranspose:
      switch (DTypeBytes(src_type_)) {
        case 1:
          return TransposeBox<uint8_t>(src, dst, dims_);
        case 2:
          return TransposeBox<uint16_t>(src, dst, dims_);
        case 8:
          return TransposeBox<uint64_t>(src, dst, dims_);
        default:
          return TransposeBox<uint32_t>(src, dst, dims_);
      }
    case Kind::kSameType:
      switch (DTypeBytes(src_type_)) {
        case 1:
          return CopySameType<uint8_t>(src, dst, dims_);
        case 2:
          return CopySameType<uint16_t>(src, dst, dims_);
        case 8:
          return CopySameType<uint64_t>(src, dst, dims_);
        default:
          return CopySameType<uint32_t>(src, dst, dims_);
      }
    case Kind::kNarrow: {
      const RowCopy narrow_row = SelectNarrowing(src_type_, dst_type_);
      const int64_t src_bytes = DTypeBytes(src_type_), dst_bytes = DTypeBytes(dst_type_);
      const Dim& inner = dims_.back();
      ForRows(dims_, 1, [&](int64_t src_off, int64_t dst_off) {
        narrow_row(src + src_off * src_bytes, inner.src_stride, dst + dst_off * dst_bytes,
                   inner.dst_stride, inner.extent);
      });
      return;
    }
  }
}

}  // namespace example_npu
