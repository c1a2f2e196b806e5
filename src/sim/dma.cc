#include "sim/dma.h"

#include <tvm/ffi/error.h>

#include <cstring>

#include "kernels/half.h"
#include "kernels/parallel.h"

namespace example_npu {
namespace {

struct Dim {
  int64_t extent;
  int64_t src_stride;
  int64_t dst_stride;
};

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
void CopyRow(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride, int64_t n) {
  if (src_stride == 1 && dst_stride == 1) {
    std::memcpy(dst, src, n * sizeof(T));
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

/*! \brief Stores float32 tiles holding exact integers (quantized results) as int8 / int16. */
template <typename T>
void NarrowToIntRow(const uint8_t* src, int64_t src_stride, uint8_t* dst, int64_t dst_stride,
                    int64_t n) {
  const float* s = reinterpret_cast<const float*>(src);
  T* t = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) t[i * dst_stride] = static_cast<T>(s[i * src_stride]);
}

using RowCopy = void (*)(const uint8_t*, int64_t, uint8_t*, int64_t, int64_t);

RowCopy SelectRowCopy(DType src_type, DType dst_type) {
  if (src_type == DType::kFloat32 && dst_type == DType::kFloat16) return NarrowRow;
  if (src_type == DType::kFloat32 && dst_type == DType::kInt8) return NarrowToIntRow<int8_t>;
  if (src_type == DType::kFloat32 && dst_type == DType::kInt16) return NarrowToIntRow<int16_t>;
  TVM_FFI_ICHECK(src_type == dst_type)
      << "DMA cannot convert " << DTypeName(src_type) << " to " << DTypeName(dst_type);
  switch (DTypeBytes(src_type)) {
    case 1:
      return CopyRow<uint8_t>;
    case 2:
      return CopyRow<uint16_t>;
    case 8:
      return CopyRow<uint64_t>;
    default:
      return CopyRow<uint32_t>;
  }
}

}  // namespace

void CopyBox(const uint8_t* src, DType src_type, const std::vector<int64_t>& src_strides,
             uint8_t* dst, DType dst_type, const std::vector<int64_t>& dst_strides,
             const std::vector<int64_t>& extent) {
  for (int64_t e : extent) {
    if (e == 0) return;
  }
  const std::vector<Dim> dims = Coalesce(extent, src_strides, dst_strides);
  const RowCopy copy_row = SelectRowCopy(src_type, dst_type);
  const int64_t src_bytes = DTypeBytes(src_type), dst_bytes = DTypeBytes(dst_type);
  const Dim& inner = dims.back();
  const size_t outer_rank = dims.size() - 1;
  int64_t rows = 1;
  for (size_t d = 0; d < outer_rank; ++d) rows *= dims[d].extent;
  // Large boxes are split over the kernel thread pool by rows.
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, inner.extent));
  kernels::ParallelFor(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t src_off = 0, dst_off = 0;
      for (int64_t d = static_cast<int64_t>(outer_rank) - 1, rest = row; d >= 0; --d) {
        const int64_t index = rest % dims[d].extent;
        rest /= dims[d].extent;
        src_off += index * dims[d].src_stride;
        dst_off += index * dims[d].dst_stride;
      }
      copy_row(src + src_off * src_bytes, inner.src_stride, dst + dst_off * dst_bytes,
               inner.dst_stride, inner.extent);
    }
  });
}

}  // namespace example_npu
