/*!
 * \file compiler/compiler.h
 * \brief The NPU compiler driver: graph -> fusion -> layout -> memory plan -> tiling -> commands.
 */
#ifndef EXAMPLE_NPU_COMPILER_COMPILER_H_
#define EXAMPLE_NPU_COMPILER_COMPILER_H_

#include "compiler/command_stream.h"
#include "config/npu_config.h"
#include "graph/graph.h"

namespace example_npu {

/*!
 * \brief Compiles a validated graph for `config`. Raises ValueError naming the group when a
 * group cannot be tiled into the configured memories.
 */
Program Compile(const Graph& graph, const NPUConfig& config);

}  // namespace example_npu

#endif  // EXAMPLE_NPU_COMPILER_COMPILER_H_
