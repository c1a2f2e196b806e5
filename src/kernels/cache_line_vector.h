/*!
 * \file kernels/cache_line_vector.h
 * \brief std::vector whose elements start on a cache line.
 *
 * The kernels load 64-byte vectors from tiles, tensors and packed weights that the compiler and
 * the packers lay out at multiples of 64 bytes. From the default allocator (16-byte aligned) every
 * such load would straddle two cache lines, which costs the float GEMM about a tenth of its time;
 * buffers the kernels stream through come from here.
 */
#ifndef EXAMPLE_NPU_KERNELS_CACHE_LINE_VECTOR_H_
#define EXAMPLE_NPU_KERNELS_CACHE_LINE_VECTOR_H_

#include <cstddef>
#include <new>
#include <vector>

namespace example_npu {
namespace kernels {

constexpr std::size_t kCacheLineBytes = 64;

/*! \brief Allocates on cache-line boundaries (C++17 aligned new). */
template <typename T>
struct CacheLineAllocator {
  using value_type = T;

  CacheLineAllocator() = default;
  template <typename U>
  explicit CacheLineAllocator(const CacheLineAllocator<U>& /*other*/) noexcept {}

  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t /*n*/) noexcept {
    ::operator delete(p, std::align_val_t{kCacheLineBytes});
  }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>& /*other*/) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>& /*other*/) const noexcept {
    return false;
  }
};

template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_CACHE_LINE_VECTOR_H_
