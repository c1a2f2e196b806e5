/*!
 * \file tests/cpp/test_direct_gemm.cc
 * \brief The in-place GEMM (float32 and uint8 x int8) against a naive triple loop, with row
 * offsets, segments, odd sizes around the register tile and vector widths, and accumulation.
 */
#include <gtest/gtest.h>
#include <tvm/ffi/error.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/direct_gemm.h"
#include "test_util.h"

namespace example_npu {
namespace kernels {
namespace {

using test_util::ExpectAllClose;
using test_util::RandomVector;

/*! \brief A's rows in a larger buffer: row r at a scrambled offset, segments with gaps. */
struct Layout {
  std::vector<int64_t> row_offsets;
  std::vector<int64_t> segment_offsets;
  int64_t segments, depth, size;
};

Layout MakeLayout(int64_t m, int64_t segments, int64_t depth, std::mt19937* rng) {
  Layout l{{}, {}, segments, depth, 0};
  const int64_t row_span = segments * (depth + 3);  // gaps between segments
  for (int64_t s = 0; s < segments; ++s) l.segment_offsets.push_back(s * (depth + 3));
  std::vector<int64_t> order(m);
  for (int64_t r = 0; r < m; ++r) order[r] = r;
  std::shuffle(order.begin(), order.end(), *rng);
  for (int64_t r = 0; r < m; ++r) l.row_offsets.push_back(order[r] * row_span + 1);
  l.size = m * row_span + 1;
  return l;
}

/*! \brief Rows in order, a uniform stride apart (the form a matmul passes, no offset table). */
void MakeUniform(Layout* l) {
  const int64_t row_span = l->segments * (l->depth + 3);
  for (size_t r = 0; r < l->row_offsets.size(); ++r) l->row_offsets[r] = r * row_span;
}

DirectRows RowsOf(const Layout& l, bool uniform = false) {
  DirectRows rows;
  rows.row_offsets = uniform ? nullptr : l.row_offsets.data();
  rows.row_stride = l.segments * (l.depth + 3);
  rows.segment_offsets = l.segment_offsets.data();
  rows.segments = l.segments;
  rows.depth = l.depth;
  return rows;
}

/*! \brief A plain row-major A with k columns (the form a matmul passes). */
DirectRows PlainRows(int64_t k) {
  DirectRows rows;
  rows.row_stride = k;
  rows.depth = k;
  return rows;
}

TEST(DirectGemmTest, FloatMatchesNaiveSumAcrossTileEdges) {
  std::mt19937 rng(11);
  for (int64_t m : {1, 5, 12, 13, 25, 64}) {
    for (int64_t n : {1, 7, 16, 17, 32, 33, 50}) {
      for (int64_t segments : {1, 3}) {
        for (bool accumulate : {false, true}) {
          const int64_t depth = 9, k = segments * depth, ldb = n + 2, ldc = n + 1;
          const bool uniform = accumulate;  // both row forms, without doubling the cases
          Layout l = MakeLayout(m, segments, depth, &rng);
          if (uniform) MakeUniform(&l);
          const std::vector<float> a = RandomVector(l.size, &rng);
          const std::vector<float> b = RandomVector(k * ldb, &rng);
          std::vector<float> c = RandomVector(m * ldc, &rng);
          std::vector<double> expected(c.begin(), c.end());
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double sum = accumulate ? c[i * ldc + j] : 0.0;
              for (int64_t s = 0; s < segments; ++s) {
                for (int64_t p = 0; p < depth; ++p) {
                  sum += static_cast<double>(a[l.row_offsets[i] + l.segment_offsets[s] + p]) *
                         b[(s * depth + p) * ldb + j];
                }
              }
              expected[i * ldc + j] = sum;
            }
          }
          DirectGemm(m, n, a.data(), RowsOf(l, uniform), b.data(), ldb, c.data(), ldc, accumulate);
          ExpectAllClose(c, expected,
                         "m" + std::to_string(m) + " n" + std::to_string(n) + " segments" +
                             std::to_string(segments) + (accumulate ? " accumulate" : "") +
                             (uniform ? " uniform rows" : ""));
        }
      }
    }
  }
}

TEST(DirectGemmTest, FloatUniformRowStride) {
  std::mt19937 rng(12);
  const int64_t m = 31, n = 45, k = 70;
  const std::vector<float> a = RandomVector(m * k, &rng), b = RandomVector(k * n, &rng);
  std::vector<float> c(m * n);
  std::vector<double> expected(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) expected[i * n + j] += double{a[i * k + p]} * b[p * n + j];
    }
  }
  const DirectRows rows = PlainRows(k);
  DirectGemm(m, n, a.data(), rows, b.data(), n, c.data(), n, false);
  ExpectAllClose(c, expected, "uniform rows");
}

/*! \brief Columns of one vector (a matrix-engine tile 16 wide) run taller row blocks: rows around
 * them, a tail, depth 1 and a matrix-engine tile's full depth. */
TEST(DirectGemmTest, FloatOneVectorWideColumns) {
  std::mt19937 rng(13);
  for (int64_t m : {1, 15, 16, 17, 33}) {
    for (int64_t n : {16, 17, 31}) {
      for (int64_t k : {1, 768}) {
        const std::vector<float> a = RandomVector(m * k, &rng), b = RandomVector(k * n, &rng);
        std::vector<float> c(m * n);
        std::vector<double> expected(m * n);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            for (int64_t p = 0; p < k; ++p) {
              expected[i * n + j] += double{a[i * k + p]} * b[p * n + j];
            }
          }
        }
        const DirectRows rows = PlainRows(k);
        DirectGemm(m, n, a.data(), rows, b.data(), n, c.data(), n, false);
        ExpectAllClose(
            c, expected,
            "m" + std::to_string(m) + " n" + std::to_string(n) + " k" + std::to_string(k), 1e-5,
            1e-4);
      }
    }
  }
}

/*! \brief One-vector columns over full row blocks read equally spaced rows through a few base
 * pointers: the same logical rows scattered (a pointer each), equally spaced through the offset
 * table (a convolution's pixels) and a uniform stride give the same bits, blocks that cross a
 * change of spacing included. */
TEST(DirectGemmTest, FloatEquallySpacedRowsKeepTheBitsOfScatteredOnes) {
  std::mt19937 rng(16);
  for (int64_t segments : {1, 3}) {
    for (int64_t m : {16, 32, 45}) {
      for (int64_t n : {16, 31}) {
        const int64_t depth = 37;
        Layout scattered = MakeLayout(m, segments, depth, &rng);
        Layout spaced = scattered;
        MakeUniform(&spaced);
        // A second spacing from row 20 on: the block of rows 16 to 31 is equally spaced in each
        // four (the uniform tile, a base per four); from row 18 on it is not (a pointer per row).
        auto step_at = [&](int64_t first) {
          Layout stepped = spaced;
          for (int64_t r = first; r < m; ++r) stepped.row_offsets[r] += 5;
          stepped.size = spaced.size + 5;
          return stepped;
        };
        const std::vector<float> logical = RandomVector(m * segments * depth, &rng);
        const std::vector<float> b = RandomVector(segments * depth * n, &rng);
        auto place = [&](const Layout& l) {
          std::vector<float> a(l.size + 8, std::numeric_limits<float>::quiet_NaN());
          for (int64_t r = 0; r < m; ++r) {
            for (int64_t s = 0; s < segments; ++s) {
              std::copy_n(logical.begin() + (r * segments + s) * depth, depth,
                          a.begin() + l.row_offsets[r] + l.segment_offsets[s]);
            }
          }
          return a;
        };
        auto run = [&](const Layout& l, bool uniform) {
          const std::vector<float> a = place(l);
          std::vector<float> c(m * n);
          DirectGemm(m, n, a.data(), RowsOf(l, uniform), b.data(), n, c.data(), n, false);
          return c;
        };
        const std::vector<float> reference = run(scattered, false);
        const std::string where = "m" + std::to_string(m) + " n" + std::to_string(n) +
                                  " segments " + std::to_string(segments);
        EXPECT_EQ(run(spaced, false), reference) << where << ", equally spaced offsets";
        EXPECT_EQ(run(spaced, true), reference) << where << ", uniform stride";
        EXPECT_EQ(run(step_at(20), false), reference) << where << ", a new spacing at row 20";
        EXPECT_EQ(run(step_at(18), false), reference) << where << ", a new spacing at row 18";
      }
    }
  }
}

/*! \brief B in panels (matrix-engine weight tiles arranged one after another, with a gap) gives
 * the bits of the same columns side by side, accumulating or not, with a partial last panel. */
TEST(DirectGemmTest, FloatPanelsMatchTheDenseColumnsBitForBit) {
  std::mt19937 rng(14);
  for (int64_t width : {16, 32}) {
    for (int64_t m : {1, 5, 16, 29}) {
      for (int64_t n : {16, 48, 40, 80, 72}) {
        const int64_t k = 97, gap = 5, panels = (n + width - 1) / width;
        const int64_t stride = k * width + gap;
        const std::vector<float> a = RandomVector(m * k, &rng), b = RandomVector(k * n, &rng);
        std::vector<float> paneled(panels * stride, std::numeric_limits<float>::quiet_NaN());
        for (int64_t p = 0; p < k; ++p) {
          for (int64_t j = 0; j < n; ++j) {
            paneled[j / width * stride + p * width + j % width] = b[p * n + j];
          }
        }
        const DirectRows rows = PlainRows(k);
        for (bool accumulate : {false, true}) {
          std::vector<float> dense = RandomVector(m * n, &rng), split = dense;
          DirectGemm(m, n, a.data(), rows, b.data(), n, dense.data(), n, accumulate);
          DirectGemmPanels(m, n, a.data(), rows, paneled.data(), width, width, stride, split.data(),
                           n, accumulate);
          EXPECT_EQ(split, dense) << "width " << width << " m" << m << " n" << n
                                  << (accumulate ? " accumulating" : "");
        }
      }
    }
  }
}

TEST(DirectGemmTest, FloatPanelsSharedOutAsWholePanelsKeepTheBits) {
  // k = 768 makes panels of 64 columns: 1,100 columns are 18 of them, which the threads take
  // whole. k = 256 makes 3 panels of 256 of 768 columns, which several threads narrow to 96 to
  // take whole. Column slices of 32 (one call per slice, its columns a slice of B) are the
  // reference: a column's sum runs over k in the same order whatever the panels.
  std::mt19937 rng(15);
  const int64_t m = 37, slice = 32;
  for (auto [k, n] : {std::pair<int64_t, int64_t>{768, 1100}, {256, 768}}) {
    const std::vector<float> a = RandomVector(m * k, &rng), b = RandomVector(k * n, &rng);
    const DirectRows rows = PlainRows(k);
    for (bool accumulate : {false, true}) {
      std::vector<float> whole = RandomVector(m * n, &rng), by_slice = whole;
      DirectGemm(m, n, a.data(), rows, b.data(), n, whole.data(), n, accumulate);
      for (int64_t j0 = 0; j0 < n; j0 += slice) {
        DirectGemm(m, std::min(slice, n - j0), a.data(), rows, b.data() + j0, n,
                   by_slice.data() + j0, n, accumulate);
      }
      EXPECT_EQ(whole, by_slice) << "k " << k << " n " << n << (accumulate ? " accumulating" : "");
    }
  }
}

TEST(DirectGemmTest, FloatAddendAsStoredMatchesTheAddAfterwardsBitForBit) {
  // A bias row or a whole matrix, either operand order, after writing or accumulating, dense or
  // in panels, with column tails narrower than a vector: the same floats as the product stored
  // first and the add applied to it afterwards.
  std::mt19937 rng(16);
  const int64_t k = 53, width = 16;
  for (int64_t m : {3, 29}) {
    for (int64_t n : {16, 37, 80}) {
      const std::vector<float> a = RandomVector(m * k, &rng), b = RandomVector(k * n, &rng);
      const int64_t panels = (n + width - 1) / width, stride = k * width;
      std::vector<float> paneled(panels * stride, 0.0f);
      for (int64_t p = 0; p < k; ++p) {
        for (int64_t j = 0; j < n; ++j)
          paneled[j / width * stride + p * width + j % width] = b[p * n + j];
      }
      const DirectRows rows = PlainRows(k);
      for (int64_t addend_stride : {int64_t{0}, n + 3}) {
        const std::vector<float> add = RandomVector(m * (n + 3), &rng);
        for (bool first : {false, true}) {
          for (bool accumulate : {false, true}) {
            std::vector<float> expected = RandomVector(m * n, &rng);
            std::vector<float> fused = expected, fused_panels = expected;
            DirectGemm(m, n, a.data(), rows, b.data(), n, expected.data(), n, accumulate);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                float& out = expected[i * n + j];
                const float x = add[i * addend_stride + j];
                out = first ? x + out : out + x;
              }
            }
            const DirectAddend addend{add.data(), addend_stride, first};
            DirectGemm(m, n, a.data(), rows, b.data(), n, fused.data(), n, accumulate, addend);
            DirectGemmPanels(m, n, a.data(), rows, paneled.data(), width, width, stride,
                             fused_panels.data(), n, accumulate, addend);
            EXPECT_EQ(fused_panels, expected) << "panels m" << m << " n" << n;
            EXPECT_EQ(fused, expected)
                << "m" << m << " n" << n << " stride " << addend_stride << (first ? " first" : "")
                << (accumulate ? " accumulating" : "");
          }
        }
      }
    }
  }
}

/*! \brief Both int8 orientations: A unsigned x B signed, or A signed x B unsigned. */
template <typename AType, typename BType>
void CheckInt8Gemm(std::mt19937* rng) {
  std::uniform_int_distribution<int> av(std::numeric_limits<AType>::min(),
                                        std::numeric_limits<AType>::max());
  std::uniform_int_distribution<int> bv(std::numeric_limits<BType>::min(),
                                        std::numeric_limits<BType>::max());
  // Depths of whole 64-byte tiles and row counts past 16 take the AMX kernel where the CPU has
  // it (kernels/amx_gemm.h), with five slivers of columns (two passes) and a short last block.
  // One to three rows split their reduction over two or four accumulator chains: depths of 5 and
  // 7 leave a tail after the last whole round of chains.
  for (int64_t m : {1, 2, 3, 7, 12, 16, 17, 29, 48}) {
    for (int64_t n : {16, 32, 48, 80}) {
      for (auto [segments, depth] :
           {std::pair<int64_t, int64_t>{1, 5}, {4, 5}, {2, 7}, {1, 32}, {3, 16}}) {
        // depth: groups of four bytes
        const bool uniform = (m + segments) % 2 == 0;  // both row forms
        Layout l = MakeLayout(m, segments, depth, rng);
        if (uniform) MakeUniform(&l);
        std::vector<int32_t> a_words(l.size), b_words(segments * depth * n);
        AType* a = reinterpret_cast<AType*>(a_words.data());
        BType* b = reinterpret_cast<BType*>(b_words.data());
        for (int64_t i = 0; i < l.size * 4; ++i) {
          a[i] = i % 5 == 0 ? std::numeric_limits<AType>::max() : av(*rng);
        }
        for (int64_t i = 0; i < segments * depth * n * 4; ++i) {
          b[i] = i % 7 == 0 ? std::numeric_limits<BType>::min() : bv(*rng);
        }
        std::vector<int32_t> c(m * n);
        if constexpr (std::is_same_v<AType, uint8_t>) {
          DirectGemmU8S8(m, n, a, RowsOf(l, uniform), b, n, c.data(), n);
        } else {
          DirectGemmS8U8(m, n, a, RowsOf(l, uniform), b, n, c.data(), n);
        }
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            int64_t sum = 0;
            for (int64_t s = 0; s < segments; ++s) {
              for (int64_t q = 0; q < depth; ++q) {
                const int64_t word = l.row_offsets[i] + l.segment_offsets[s] + q;
                for (int64_t t = 0; t < 4; ++t) {
                  sum += int64_t{a[word * 4 + t]} * b[((s * depth + q) * n + j) * 4 + t];
                }
              }
            }
            ASSERT_EQ(c[i * n + j], sum) << "m" << m << " n" << n << " (" << i << ", " << j << ")";
          }
        }
      }
    }
  }
}

TEST(DirectGemmTest, Int8SumsExactlyIncludingExtremeValues) {
  if (!HasInt8DotProduct()) {
    // A portable build has no int8 dot-product unit: the quantized kernels take their portable
    // loop (tests/cpp/test_quantize.cc covers both).
    EXPECT_THROW(DirectGemmU8S8(1, 16, nullptr, DirectRows{}, nullptr, 16, nullptr, 16),
                 tvm::ffi::Error);
    return;
  }
  std::mt19937 rng(13);
  CheckInt8Gemm<uint8_t, int8_t>(&rng);
  CheckInt8Gemm<int8_t, uint8_t>(&rng);
}

}  // namespace
}  // namespace kernels
}  // namespace example_npu
