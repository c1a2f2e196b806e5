/*!
 * \file sim/engines.h
 * \brief The compute engines: run one op on float32 tiles through the kernels.
 */
#ifndef EXAMPLE_NPU_SIM_ENGINES_H_
#define EXAMPLE_NPU_SIM_ENGINES_H_

#include <optional>
#include <vector>

#include "graph/op.h"
#include "kernels/kernels.h"

namespace example_npu {

/*! \brief A float32 operand: data and shape, dense unless `strides` is given. */
struct OperandF32 {
  const float* data;
  const kernels::Shape* shape;
  /*! \brief Element strides per dim of a view read in place (see StridedView); nullptr: dense. */
  const std::vector<int64_t>* strides = nullptr;
};

/*! \brief A matmul tile as one [m, k] x [k, n] product. */
struct MatrixDims {
  int64_t m, k, n;
};

/*! \brief The product a matmul of operands of shapes `a` and `b` computes where it is a single
 * matrix product (rank 2, or leading dims of 1 on both), else nullopt. */
std::optional<MatrixDims> SingleMatrixProduct(const kernels::Shape& a, const kernels::Shape& b);

/*!
 * \brief Whether the engine running `op` can read its first input and write its output as
 * strided views with contiguous innermost elements, not only as dense tiles: the vector engine's
 * depthwise NHWC convolution (it addresses every pixel through a stride anyway) and a matmul
 * tile that is a single matrix product whose rows the register tiles read and write one by one
 * (kernels::MatmulRowsApply), which reads its second input's rows through a stride too.
 */
bool StridedView(OpKind op, const OpAttrs& attrs, const std::vector<OperandF32>& inputs);

/*! \brief The pixel strides of an NHWC view's element strides (in tile order, channels
 * contiguous). */
kernels::PixelStrides PixelStridesOf(const std::vector<int64_t>& strides);

/*! \brief Which input of an op where StridedView holds may be a view: the first, and a matmul's
 * second. */
inline bool ViewableInput(OpKind op, size_t input) {
  return input == 0 || (op == OpKind::kMatmul && input == 1);
}

/*!
 * \brief Computes `op` with `attrs` on `inputs` into `out` (shape `out_shape`), dispatching to the
 * kernel of the engine that owns the op. Used on tiles by the emulator and on whole tensors by
 * the tests' untiled reference. `out` must not alias an input. Strided inputs and `out_strides`
 * are only for ops where StridedView holds.
 */
void RunOp(OpKind op, const OpAttrs& attrs, const std::vector<OperandF32>& inputs, float* out,
           const kernels::Shape& out_shape, const std::vector<int64_t>* out_strides = nullptr);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_ENGINES_H_
