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

/*! \brief A float32 operand: data and dense shape. */
struct OperandF32 {
  const float* data;
  const kernels::Shape* shape;
};

/*!
 * \brief Computes `op` with `attrs` on `inputs` into `out` (shape `out_shape`), dispatching to the
 * kernel of the engine that owns the op. Used on tiles by the emulator and on whole tensors by
 * the tests' untiled reference. `out` must not alias an input.
 */
void RunOp(OpKind op, const OpAttrs& attrs, const std::vector<OperandF32>& inputs, float* out,
           const kernels::Shape& out_shape);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SIM_ENGINES_H_
