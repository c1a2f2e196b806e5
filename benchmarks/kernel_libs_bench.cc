/*!
 * \file benchmarks/kernel_libs_bench.cc
 * \brief The matrix engine's in-place GEMM against OpenBLAS and oneDNN (Debian's libopenblas-dev
 * and libdnnl-dev) on the operand shapes of the emulator's tiles, one thread each.
 *
 *     kernel_libs_bench        (OMP_NUM_THREADS=1 EXAMPLE_NPU_NUM_THREADS=1 for one thread)
 *
 * Times the GEMM core only, operands resident in cache, best of 7 rounds of 200 calls: float32
 * C = A B (row-major), and int8 with int32 sums (ours: signed A against packed unsigned B,
 * DirectGemmS8U8, without packing B; oneDNN: dnnl_gemm_s8s8s32, which packs inside the call).
 */
#include <cblas.h>
#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/direct_gemm.h"

namespace {

template <class F>
double Microseconds(F call) {
  for (int i = 0; i < 50; ++i) call();
  double best = 1e30;
  for (int round = 0; round < 7; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) call();
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / 200);
  }
  return best;
}

}  // namespace

int main() {
  using example_npu::kernels::DirectRows;
  openblas_set_num_threads(1);
  std::mt19937 rng(0);
  // (m, n, k): conv tiles (pixels, output channels, taps x input channels) and matmul tiles.
  const int shapes[][3] = {
      {64, 16, 576}, {49, 16, 1152}, {196, 64, 576}, {64, 32, 256}, {128, 16, 512}};
  std::printf("| m x n x k | ours fp32 us | OpenBLAS | oneDNN | ours int8 us | oneDNN int8 |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const auto& s : shapes) {
    const int m = s[0], n = s[1], k = s[2];
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (float& v : a) v = value(rng);
    for (float& v : b) v = value(rng);
    DirectRows rows;
    rows.row_stride = k;
    rows.depth = k;
    const double ours = Microseconds([&] {
      example_npu::kernels::DirectGemm(m, n, a.data(), rows, b.data(), n, c.data(), n, false);
    });
    const double blas = Microseconds([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(),
                  n, 0.0f, c.data(), n);
    });
    const double dnnl = Microseconds(
        [&] { dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n); });
    std::vector<int8_t> a8(m * k, 3), b8(k * n, -2);
    std::vector<int32_t> b_packed(k / 4 * n, 0x01020304), c32(m * n);
    const int32_t no_offset = 0;
    rows.row_stride = rows.depth = k / 4;
    const double ours8 = Microseconds([&] {
      example_npu::kernels::DirectGemmS8U8(m, n, a8.data(), rows,
                                           reinterpret_cast<const uint8_t*>(b_packed.data()), n,
                                           c32.data(), n);
    });
    const double dnnl8 = Microseconds([&] {
      dnnl_gemm_s8s8s32('N', 'N', 'F', m, n, k, 1.0f, a8.data(), k, 0, b8.data(), n, 0, 0.0f,
                        c32.data(), n, &no_offset);
    });
    std::printf("| %d x %d x %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", m, n, k, ours, blas, dnnl,
                ours8, dnnl8);
  }
  return 0;
}
