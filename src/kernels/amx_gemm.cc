#include "kernels/amx_gemm.h"

#include <algorithm>
#include <cstring>

#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace example_npu {
namespace kernels {

#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
namespace {

// Linux asks a process to request the tile data state before its first tile instruction.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool AmxGranted() {
  static const bool granted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
}

/*! \brief LDTILECFG's 64-byte operand: palette 1, every tile 16 rows of 64 bytes. */
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Tiles: C in 0-3 (up to four 16-column slivers of one 16-row block), A in 4, B in 5.
constexpr int kRows = 16;
constexpr int kGroups = 16;  // 4-byte groups of the reduction per tile: 64 products per lane
constexpr int kMaxSlivers = 4;

// The tile operands of these instructions are register names: literals, one case each.
void Accumulate(int sliver, bool signed_a) {
  if (signed_a) {
    switch (sliver) {
      case 0:
        _tile_dpbsud(0, 4, 5);
        return;
      case 1:
        _tile_dpbsud(1, 4, 5);
        return;
      case 2:
        _tile_dpbsud(2, 4, 5);
        return;
      default:
        _tile_dpbsud(3, 4, 5);
        return;
    }
  }
  switch (sliver) {
    case 0:
      _tile_dpbusd(0, 4, 5);
      return;
    case 1:
      _tile_dpbusd(1, 4, 5);
      return;
    case 2:
      _tile_dpbusd(2, 4, 5);
      return;
    default:
      _tile_dpbusd(3, 4, 5);
      return;
  }
}

void Zero(int sliver) {
  switch (sliver) {
    case 0:
      _tile_zero(0);
      return;
    case 1:
      _tile_zero(1);
      return;
    case 2:
      _tile_zero(2);
      return;
    default:
      _tile_zero(3);
      return;
  }
}

void Store(int sliver, int32_t* c, int64_t stride_bytes) {
  switch (sliver) {
    case 0:
      _tile_stored(0, c, stride_bytes);
      return;
    case 1:
      _tile_stored(1, c, stride_bytes);
      return;
    case 2:
      _tile_stored(2, c, stride_bytes);
      return;
    default:
      _tile_stored(3, c, stride_bytes);
  }
}

/*!
 * \brief One block of up to 16 rows and 4 slivers, the reduction 16 groups (64 products per lane)
 * at a time; each segment holds whole tiles of them (AmxGemmInt8 checks). A's rows are read in
 * place when they are 16 evenly spaced rows (a matrix's, or a convolution's pixels along an output
 * row), else gathered, 64 bytes per row, into a tile (rows at any offsets: the implicit im2col of
 * a convolution across output rows; missing rows of the last block are zero).
 */
void Block(bool signed_a, int64_t i0, int64_t rows_in_block, int64_t j0, int slivers,
           const uint8_t* a, const DirectRows& rows, const uint8_t* b, int64_t ldb, int32_t* c,
           int64_t ldc) {
  alignas(64) uint8_t a_tile[kRows * 64];
  alignas(64) int32_t c_tile[kRows * 16];
  // The rows a short last block lacks are zeros (the gathered ones are written per tile).
  std::memset(a_tile + rows_in_block * 64, 0, (kRows - rows_in_block) * 64);
  for (int s = 0; s < slivers; ++s) Zero(s);
  auto row_offset = [&](int64_t r) {
    return rows.row_offsets ? rows.row_offsets[r] : r * rows.row_stride;
  };
  // 4-byte groups from one of the block's rows to the next where all 16 lie evenly spaced (a
  // matrix's rows; a convolution's pixels along one output row): the tile load reads them in
  // place. 0 where they must be gathered through memory, which costs more than their products.
  int64_t stride = 0;
  if (rows_in_block == kRows && rows.row_offsets == nullptr) {
    stride = rows.row_stride;
  } else if (rows_in_block == kRows) {
    const int64_t* offsets = rows.row_offsets + i0;
    stride = offsets[1] - offsets[0];
    for (int64_t r = 2; r < kRows && stride > 0; ++r) {
      if (offsets[r] - offsets[0] != r * stride) stride = 0;
    }
  }
  for (int64_t seg = 0; seg < rows.segments; ++seg) {
    const int64_t seg_offset = rows.segment_offsets ? rows.segment_offsets[seg] : 0;
    for (int64_t q0 = 0; q0 < rows.depth; q0 += kGroups) {
      if (stride > 0) {
        _tile_loadd(4, a + (row_offset(i0) + seg_offset + q0) * 4, stride * 4);
      } else {
        for (int64_t r = 0; r < rows_in_block; ++r) {
          _mm512_store_si512(a_tile + r * 64,
                             _mm512_loadu_si512(a + (row_offset(i0 + r) + seg_offset + q0) * 4));
        }
        _tile_loadd(4, a_tile, 64);
      }
      const uint8_t* b_rows = b + ((seg * rows.depth + q0) * ldb + j0) * 4;
      for (int s = 0; s < slivers; ++s) {
        _tile_loadd(5, b_rows + s * 64, ldb * 4);
        Accumulate(s, signed_a);
      }
    }
  }
  for (int s = 0; s < slivers; ++s) {
    int32_t* out = c + i0 * ldc + j0 + 16 * s;
    if (rows_in_block == kRows) {
      Store(s, out, ldc * 4);
    } else {
      Store(s, c_tile, 64);
      for (int64_t r = 0; r < rows_in_block; ++r) std::memcpy(out + r * ldc, c_tile + r * 16, 64);
    }
  }
}

}  // namespace

bool AmxGemmInt8(bool signed_a, int64_t m, int64_t n, const uint8_t* a, const DirectRows& rows,
                 const uint8_t* b, int64_t ldb, int32_t* c, int64_t ldc) {
  // Fewer rows than a tile waste most of it, and segments of fewer than 64 channels would need a
  // gather of every few bytes (a convolution of 16 channels): the VNNI kernel is faster there.
  if (m < kRows || n <= 0 || n % 16 != 0 || rows.depth % kGroups != 0 || !AmxGranted()) {
    return false;
  }
  TileConfig config;
  for (int t = 0; t < 6; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = kRows;
  }
  // Loaded on every call: other code on this thread (oneDNN in the same process) may have
  // configured the tiles its own way since.
  _tile_loadconfig(&config);
  for (int64_t i0 = 0; i0 < m; i0 += kRows) {
    for (int64_t j0 = 0; j0 < n; j0 += 16 * kMaxSlivers) {
      const int slivers = static_cast<int>(std::min<int64_t>(kMaxSlivers, (n - j0) / 16));
      Block(signed_a, i0, std::min<int64_t>(kRows, m - i0), j0, slivers, a, rows, b, ldb, c, ldc);
    }
  }
  _tile_release();
  return true;
}

#else

bool AmxGemmInt8(bool, int64_t, int64_t, const uint8_t*, const DirectRows&, const uint8_t*, int64_t,
                 int32_t*, int64_t) {
  return false;
}

#endif

}  // namespace kernels
}  // namespace example_npu
