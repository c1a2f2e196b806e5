/*!
 * \file kernels/amx_gemm.h
 * \brief The int8 direct GEMM on Intel AMX (tile registers, TDPBUSD / TDPBSUD): the same operands
 * and exact int32 sums as DirectGemmU8S8 / DirectGemmS8U8, sixteen rows by sixteen columns by
 * sixty-four products per instruction. kernels/direct_gemm.cc tries it first.
 */
#ifndef EXAMPLE_NPU_KERNELS_AMX_GEMM_H_
#define EXAMPLE_NPU_KERNELS_AMX_GEMM_H_

#include <cstdint>

#include "kernels/direct_gemm.h"

namespace example_npu {
namespace kernels {

/*!
 * \brief C[m, n] = A * B as DirectGemmU8S8 (signed_a false: A uint8, B int8) or DirectGemmS8U8
 * (signed_a true: A int8, B uint8) define it. Returns false, having done nothing, where AMX is
 * not available (a build without it, a CPU or kernel that does not grant it) or the GEMM is too
 * small to gain from it: the caller then runs the VNNI kernel.
 */
bool AmxGemmInt8(bool signed_a, int64_t m, int64_t n, const uint8_t* a, const DirectRows& rows,
                 const uint8_t* b, int64_t ldb, int32_t* c, int64_t ldc);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_AMX_GEMM_H_
