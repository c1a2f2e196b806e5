/*!
 * \file graph/runtime_params.h
 * \brief Quantization parameters that arrive as call arguments instead of constants.
 *
 * The specification's FuseOpsByPattern(bind_constants=False) flow passes every constant of a
 * composite, scales and zero points included, as an argument of the NPU function. The codegen
 * then writes such an attribute as {"arg": <input node id>}: its value is that input tensor's (a
 * number for a one-element tensor, else a list). A graph with such references is parsed and
 * compiled once with placeholder values (ones: valid scales, zero points, biases and table
 * entries) for validation and the profile, and bound to the real values at run time (the
 * Executor compiles it again for each new set of values).
 */
#ifndef EXAMPLE_NPU_GRAPH_RUNTIME_PARAMS_H_
#define EXAMPLE_NPU_GRAPH_RUNTIME_PARAMS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace example_npu {

/*! \brief The input node ids referenced by {"arg": id} attributes, in first-use order (none
 * for text that is not a graph object with a node list). */
std::vector<int64_t> RuntimeParamInputs(const std::string& json_text);

/*! \brief The values of one referenced input node: its elements, read as doubles. */
using RuntimeParamValues = std::function<std::vector<double>(int64_t node)>;

/*!
 * \brief json_text with each {"arg": id} replaced by values(id): a number for one element, else
 * a list; integers when the input node's dtype is an integer type. Throws ValueError for a
 * reference to a node that is not an input.
 */
std::string BindRuntimeParams(const std::string& json_text, const RuntimeParamValues& values);

/*! \brief BindRuntimeParams with placeholder ones shaped like each referenced input. */
std::string BindPlaceholderParams(const std::string& json_text);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_GRAPH_RUNTIME_PARAMS_H_
