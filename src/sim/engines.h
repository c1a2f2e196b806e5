/*!
 * \file sim/engines.h
 * \brief The compute engines: run one op on float32 tiles through the kernels.
 */
#ifndef EXAMPLE_NPU_SIM_ENGINES_H_
#define EXAMPLE_NPU_SIM_ENGINES_H_

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

/*!
 * \brief Whether the engine running `op` can read its first input and write its output as
 * strided views with contiguous innermost elements, not only as dense tiles: the vector engine's
 * depthwise NHWC convolution (it addresses every pixel through a stride anyway) and a 2-D matmul
 * tile whose rows the register tiles read and write one by one (kernels::MatmulRowsApply).
 */
bool StridedView(OpKind op, const OpAttrs& attrs, const std::vector<OperandF32>& inputs);

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
