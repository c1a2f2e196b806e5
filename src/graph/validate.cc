/*!
 * \file graph/validate.cc
 * \brief Structural checks, dtype and quantization checks and axis normalisation for NPU graphs.
 *
 * The shapes in the JSON come from Relax's own shape inference; re-deriving them (InferShape in
 * shape_inference.cc) and comparing means a graph whose attributes and shapes disagree
 * (hand-edited, truncated, or produced by a buggy codegen) is rejected at load instead of making
 * a kernel read out of bounds.
 */
#include <tvm/ffi/error.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>

#include "graph/graph.h"
#include "graph/node_checks.h"
#include "kernels/window.h"
#include "support/checked_math.h"
#include "support/json_input.h"

namespace example_npu {
namespace {

using node_checks::ExpectRank;
using node_checks::ImageSize;
using node_checks::NormalizeAxis;
using node_checks::NormalizedSet;
using node_checks::Where;

/*! \brief Input count of an op; 0 for concat, which takes one or more. */
size_t ExpectedArity(OpKind op) {
  if (IsComparison(op)) return 2;
  switch (op) {
    case OpKind::kConcat:
    case OpKind::kQnnConcat:
      return 0;
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kPower:
    case OpKind::kQnnAdd:
    case OpKind::kQnnMultiply:
    case OpKind::kMatmul:
    case OpKind::kConv1d:
    case OpKind::kConv2d:
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
    case OpKind::kQnnMatmul:
    case OpKind::kAdd:
    case OpKind::kSubtract:
    case OpKind::kMultiply:
    case OpKind::kDivide:
    case OpKind::kPrelu:
    case OpKind::kConv2dTranspose:
    case OpKind::kTake:
      return 2;
    case OpKind::kBatchNorm:
      return 5;
    case OpKind::kLayerNorm:
    case OpKind::kGroupNorm:
    case OpKind::kInstanceNorm:
    case OpKind::kWhere:
      return 3;
    default:
      return 1;
  }
}

/*! \brief Whether input `k` of `node` may have `dtype`: same as the node, except across the
 * quantized boundary (quantize, dequantize, the integer qnn ops and their int8 weights). */
bool DTypeAllowed(const Node& node, size_t k, DType dtype) {
  switch (node.op) {
    case OpKind::kQuantize:
      return dtype == DType::kFloat32 && IsQuantizedDType(node.dtype);
    case OpKind::kDequantize:
      return IsQuantizedDType(dtype) && node.dtype == DType::kFloat32;
    case OpKind::kQnnMatmul:
      if (node.dtype == DType::kFloat32) {  // an exact integer sum: 8-bit activations
        return k == 0 ? IsQuantizedDType(dtype) && DTypeBytes(dtype) == 1 : dtype == DType::kInt8;
      }
      return IsQuantizedDType(node.dtype) &&
             (k == 0 ? IsQuantizedDType(dtype) : dtype == DType::kInt8);
    case OpKind::kQnnConv2d:
    case OpKind::kQnnConv2dTranspose:
      return IsQuantizedDType(node.dtype) &&
             (k == 0 ? IsQuantizedDType(dtype) : dtype == DType::kInt8);
    case OpKind::kArgmax:
    case OpKind::kArgmin:
      // Indices of a float tensor.
      return node.dtype == DType::kInt64 && (dtype == DType::kFloat32 || dtype == DType::kFloat16);
    case OpKind::kCast:
      return (node.dtype == DType::kFloat32 && IsCastInput(dtype)) ||
             ((node.dtype == DType::kInt32 || node.dtype == DType::kInt64) &&
              dtype == DType::kFloat32);
    case OpKind::kTopk:
      // Values of a float / 8-bit tensor, or their indices as int32 / int64.
      if (dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kInt8 &&
          dtype != DType::kUInt8) {
        return false;
      }
      return std::get<TopkAttrs>(node.attrs).params.indices
                 ? node.dtype == DType::kInt32 || node.dtype == DType::kInt64
                 : dtype == node.dtype;
    case OpKind::kTake:
      // Rows of the node's dtype, picked by integer ids.
      return k == 0 ? dtype == node.dtype : dtype == DType::kInt32 || dtype == DType::kInt64;
    case OpKind::kQnnLut:
      // Tables cover 8-bit inputs only; a lookup table may hold float32 values.
      return (IsQuantizedDType(node.dtype) || node.dtype == DType::kFloat32) &&
             DTypeBytes(dtype) == 1;
    case OpKind::kQnnSoftmax:
      return IsQuantizedDType(node.dtype) && DTypeBytes(dtype) == 1;
    default:
      if (IsQnnOp(node.op)) return IsQuantizedDType(node.dtype) && IsQuantizedDType(dtype);
      return dtype == node.dtype;
  }
}

/*! \brief The integer arithmetic a qnn op's attributes ask for. */
kernels::Rounding RoundingOf(const OpAttrs& attrs) {
  if (const auto* qnn = std::get_if<QnnAttrs>(&attrs)) return qnn->requant.rounding;
  if (const auto* op = std::get_if<QnnRequantizeAttrs>(&attrs)) return op->params.rounding;
  if (const auto* op = std::get_if<QnnBinaryAttrs>(&attrs)) return op->params.rounding;
  if (const auto* op = std::get_if<QnnPoolAttrs>(&attrs)) return op->params.rounding;
  if (const auto* op = std::get_if<QnnSoftmaxAttrs>(&attrs)) return op->params.rounding;
  if (const auto* op = std::get_if<QnnConcatAttrs>(&attrs)) {
    if (!op->inputs.empty()) return op->inputs[0].rounding;
  }
  return kernels::Rounding::kTvm;
}

/*! \brief Attributes that must agree with the input dtypes and count. */
void CheckQnnInputs(const Graph& graph, const Node& node) {
  if (RoundingOf(node.attrs) == kernels::Rounding::kTflite) {
    // TFLite's 8-bit kernels: activations of 8 bits (int32 accumulators, as TFLite's).
    const DType input = graph.nodes[node.inputs[0]].dtype;
    if (DTypeBytes(input) != 1) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": TFLite rounding needs 8-bit inputs, not "
                                << DTypeName(input);
    }
  }
  if (node.op == OpKind::kQnnMatmul && node.dtype == DType::kFloat32) {
    const QnnAttrs& qnn = std::get<QnnAttrs>(node.attrs);
    if (qnn.input_zero_point_node >= 0) {
      const int64_t id = qnn.input_zero_point_node;
      const DType activation = graph.nodes[node.inputs[0]].dtype;
      if (id >= static_cast<int64_t>(graph.nodes.size()) ||
          graph.nodes[id].kind != NodeKind::kInput ||
          kernels::NumElements(graph.nodes[id].shape) != 1 || graph.nodes[id].dtype != activation) {
        TVM_FFI_THROW(ValueError) << Where(node) << ": input_zero_point_node " << id
                                  << " must be a one-element " << DTypeName(activation)
                                  << " input of the graph";
      }
    }
    // TVM's int32 matmul wraps past int32; the NPU's sums are exact. Refused where they could
    // part: |x - zero point| <= 255, |w - weight zero point| <= 128 + |weight zero point|. (A
    // rank-0 activation is InferShape's error, next.)
    const Shape& activation_shape = graph.nodes[node.inputs[0]].shape;
    const int64_t depth = activation_shape.empty() ? 0 : activation_shape.back();
    const int64_t largest_product = 255 * (128 + std::abs(qnn.weight_zero_point));
    if (depth > std::numeric_limits<int32_t>::max() / largest_product) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": a depth of " << depth
                                << " can leave int32, where TVM's integer sum wraps";
    }
  }
  if (const auto* lut = std::get_if<QnnLutAttrs>(&node.attrs)) {
    const DType input = graph.nodes[node.inputs[0]].dtype;
    const int64_t lo = QuantizedRange(input).first;
    if (lut->table.index_offset != lo || lut->table.values.size() != 256) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": a " << DTypeName(input)
                                << " input needs a 256-entry table starting at " << lo;
    }
  }
  if (const auto* concat = std::get_if<QnnConcatAttrs>(&node.attrs)) {
    if (concat->inputs.size() != node.inputs.size()) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": " << concat->inputs.size()
                                << " input quantizations for " << node.inputs.size() << " inputs";
    }
  }
}

void CheckQnnChannels(const Node& node, const QnnAttrs& qnn) {
  int64_t channels = node.shape.back();
  if (node.op == OpKind::kQnnConv2d || node.op == OpKind::kQnnConv2dTranspose) {
    const kernels::DataLayout layout =
        node.op == OpKind::kQnnConv2d ? qnn.conv.data_layout : qnn.transposed.params.data_layout;
    channels = node.shape[layout == kernels::DataLayout::kNCHW ? 1 : 3];
  }
  const size_t scales = qnn.weight_scales.size();
  if (scales != 1 && static_cast<int64_t>(scales) != channels) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": " << scales << " weight scales for " << channels
                              << " output channels";
  }
  if (!qnn.bias.empty() && static_cast<int64_t>(qnn.bias.size()) != channels) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": " << qnn.bias.size() << " biases for "
                              << channels << " output channels";
  }
}

/*! \brief Zero points lie in their integer dtype's range, as Relax's int8 / int16 constants do. */
void CheckZeroPoint(const Node& node, DType input_dtype) {
  int64_t zero_point = 0;
  DType dtype = input_dtype;
  if (const auto* qnn = std::get_if<QnnAttrs>(&node.attrs)) {
    zero_point = qnn->input_zero_point;
  } else if (const auto* quant = std::get_if<QuantAttrs>(&node.attrs)) {
    zero_point = quant->zero_point;
    if (node.op == OpKind::kQuantize) dtype = node.dtype;
  } else {
    return;
  }
  const auto [lo, hi] = IsQuantizedDType(dtype) ? QuantizedRange(dtype)
                                                : std::pair<int64_t, int64_t>{INT32_MIN, INT32_MAX};
  if (zero_point < lo || zero_point > hi) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": zero point " << zero_point << " is outside the "
                              << DTypeName(dtype) << " range";
  }
}

/*!
 * \brief An empty result is computed by doing nothing (the compiler emits no tiles for it). A
 * non-empty result of an empty operand (a matmul over K = 0, a reduction over an empty axis,
 * a concat with an empty piece) would need its own semantics (zeros, NaN, a copy of the other
 * pieces): the pattern checks keep such ops on the CPU, and a graph that has one is refused.
 */
void CheckEmptyOperands(const Node& node, const std::vector<const Shape*>& input_shapes) {
  if (kernels::NumElements(node.shape) == 0) return;
  for (const Shape* shape : input_shapes) {
    if (kernels::NumElements(*shape) == 0) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": an empty operand " << ShapeText(*shape)
                                << " with a non-empty result " << ShapeText(node.shape)
                                << " (such ops stay on the CPU)";
    }
  }
}

void CheckStructure(const Graph& graph) {
  int64_t count = static_cast<int64_t>(graph.nodes.size());
  for (int64_t i = 0; i < count; ++i) {
    const Node& node = graph.nodes[i];
    if (node.kind != NodeKind::kOp) continue;
    const size_t arity = ExpectedArity(node.op);
    if (arity == 0 && node.inputs.empty()) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": expects at least one input";
    }
    if (arity != 0 && node.inputs.size() != arity) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": expects " << arity << " inputs, got "
                                << node.inputs.size();
    }
    for (int64_t input : node.inputs) {
      if (input < 0 || input >= i) {
        TVM_FFI_THROW(ValueError) << Where(node) << ": input " << input
                                  << " does not name an earlier node";
      }
    }
  }
  std::vector<bool> seen(graph.nodes.size(), false);
  for (int64_t arg : graph.arg_nodes) {
    if (arg < 0 || arg >= count || graph.nodes[arg].kind != NodeKind::kInput || seen[arg]) {
      TVM_FFI_THROW(ValueError) << "NPU graph: arg_nodes entry " << arg
                                << " is not a distinct input node";
    }
    seen[arg] = true;
  }
  for (int64_t i = 0; i < count; ++i) {
    if (graph.nodes[i].kind == NodeKind::kInput && !seen[i]) {
      TVM_FFI_THROW(ValueError) << "NPU graph: input node " << Printable(graph.nodes[i].name)
                                << " is missing from arg_nodes";
    }
  }
  if (graph.heads.empty()) TVM_FFI_THROW(ValueError) << "NPU graph has no outputs (heads)";
  for (int64_t head : graph.heads) {
    if (head < 0 || head >= count) {
      TVM_FFI_THROW(ValueError) << "NPU graph: head " << head << " does not name a node";
    }
  }
}

/*! \brief Whole-tensor {H, W} of a resize / adaptive pooling: input from the input, output from
 * the node's declared shape (InferShape then checks the other dims). */
template <typename Params>
void NormalizeImageSizes(const Shape& data, const Node& node, Params* p) {
  ExpectRank(node, data, 4, "data");
  ExpectRank(node, node.shape, 4, "result");
  p->in_size = ImageSize(data, p->layout);
  p->out_size = ImageSize(node.shape, p->layout);
}

void NormalizePad(const Shape& data, const Node& node, kernels::PadParams* p) {
  if (p->before.size() != data.size()) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": pad_width has " << p->before.size()
                              << " pairs for rank " << data.size();
  }
  p->in_shape = data;
  p->in_begin.assign(data.size(), 0);
  p->out_begin.assign(data.size(), 0);
  for (size_t d = 0; d < data.size(); ++d) {
    const bool padded = p->before[d] > 0 || p->after[d] > 0;
    if (padded && data[d] == 0 && p->mode != kernels::PadMode::kConstant) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": cannot "
                                << "mirror or wrap an empty dim";
    }
    if (padded && p->mode == kernels::PadMode::kReflect &&
        (p->before[d] >= data[d] || p->after[d] >= data[d])) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": reflect padding of dim " << d
                                << " must be narrower than its extent " << data[d];
    }
  }
}

void NormalizeNorm(const Shape& data, const Node& node, NormAttrs* norm) {
  kernels::GroupNormParams& p = norm->params;
  p.channel_axis = NormalizeAxis(p.channel_axis, data.size(), Where(node));
  p.axes = NormalizedSet(p.axes, data.size(), Where(node));
  if (std::find(p.axes.begin(), p.axes.end(), p.channel_axis) != p.axes.end()) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": axes contain the channel axis";
  }
  const int64_t channels = data[p.channel_axis];
  if (node.op == OpKind::kInstanceNorm) p.groups = channels;
  if (p.groups <= 0 || channels % p.groups != 0) {
    TVM_FFI_THROW(ValueError) << Where(node) << ": " << channels << " channels in " << p.groups
                              << " groups";
  }
  norm->count = channels / p.groups;
  for (int64_t axis : p.axes) norm->count = checked::Mul(norm->count, data[axis], "group size");
}

}  // namespace

Shape LiftConv1dData(const Shape& s, kernels::DataLayout layout) {
  if (s.size() != 3) return s;
  return layout == kernels::DataLayout::kNCHW ? Shape{s[0], s[1], 1, s[2]}
                                              : Shape{s[0], 1, s[1], s[2]};
}

Shape LiftConv1dWeight(const Shape& s, kernels::KernelLayout layout) {
  if (s.size() != 3) return s;
  return layout == kernels::KernelLayout::kOIHW ? Shape{s[0], s[1], 1, s[2]}
                                                : Shape{1, s[0], s[1], s[2]};
}

void NormalizeAxes(Graph* graph) {
  CheckStructure(*graph);
  for (Node& node : graph->nodes) {
    if (node.kind != NodeKind::kOp) continue;
    size_t rank = graph->nodes[node.inputs[0]].shape.size();
    if (auto* softmax = std::get_if<SoftmaxAttrs>(&node.attrs)) {
      softmax->axis = NormalizeAxis(softmax->axis, rank, Where(node));
    } else if (auto* qnn_softmax = std::get_if<QnnSoftmaxAttrs>(&node.attrs)) {
      qnn_softmax->axis = NormalizeAxis(qnn_softmax->axis, rank, Where(node));
    } else if (auto* concat = std::get_if<QnnConcatAttrs>(&node.attrs)) {
      concat->axis = NormalizeAxis(concat->axis, rank, Where(node));
    } else if (auto* topk = std::get_if<TopkAttrs>(&node.attrs)) {
      topk->params.axis = NormalizeAxis(topk->params.axis, rank, Where(node));
    } else if (auto* bn = std::get_if<BatchNormAttrs>(&node.attrs)) {
      bn->axis = NormalizeAxis(bn->axis, rank, Where(node));
    } else if (auto* permute = std::get_if<PermuteDimsAttrs>(&node.attrs)) {
      if (permute->axes.empty()) {
        permute->axes.resize(rank);
        std::iota(permute->axes.rbegin(), permute->axes.rend(), 0);
      }
      for (int64_t& axis : permute->axes) axis = NormalizeAxis(axis, rank, Where(node));
    } else if (auto* concat = std::get_if<ConcatAttrs>(&node.attrs)) {
      concat->axis = NormalizeAxis(concat->axis, rank, Where(node));
    } else if (auto* reduce = std::get_if<ReduceAttrs>(&node.attrs)) {
      reduce->axes = NormalizedSet(reduce->axes, rank, Where(node));
    } else if (auto* resize = std::get_if<ResizeAttrs>(&node.attrs)) {
      NormalizeImageSizes(graph->nodes[node.inputs[0]].shape, node, &resize->params);
    } else if (auto* pool = std::get_if<AdaptivePoolAttrs>(&node.attrs)) {
      NormalizeImageSizes(graph->nodes[node.inputs[0]].shape, node, &pool->params);
    } else if (auto* pad = std::get_if<PadAttrs>(&node.attrs)) {
      NormalizePad(graph->nodes[node.inputs[0]].shape, node, &pad->params);
    } else if (auto* group_norm = std::get_if<NormAttrs>(&node.attrs)) {
      NormalizeNorm(graph->nodes[node.inputs[0]].shape, node, group_norm);
    } else if (auto* norm = std::get_if<LayerNormAttrs>(&node.attrs)) {
      norm->axes = NormalizedSet(norm->axes, rank, Where(node));
      norm->first_axis = static_cast<int64_t>(rank - norm->axes.size());
      for (size_t k = 0; k < norm->axes.size(); ++k) {
        if (norm->axes.empty() || norm->axes[k] != norm->first_axis + static_cast<int64_t>(k)) {
          TVM_FFI_THROW(ValueError) << Where(node) << ": axes must be the trailing dims";
        }
      }
      if (norm->axes.empty()) TVM_FFI_THROW(ValueError) << Where(node) << ": axes is empty";
    }
  }
}

void ValidateGraph(const Graph& graph) {
  CheckStructure(graph);
  for (const Node& node : graph.nodes) {
    if (node.kind != NodeKind::kOp) continue;
    std::vector<const Shape*> input_shapes;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Node& producer = graph.nodes[node.inputs[k]];
      if (!DTypeAllowed(node, k, producer.dtype)) {
        TVM_FFI_THROW(ValueError) << Where(node) << ": input " << Printable(producer.name) << " is "
                                  << DTypeName(producer.dtype) << " but the node is "
                                  << DTypeName(node.dtype) << " (mixed dtypes are not supported)";
      }
      input_shapes.push_back(&producer.shape);
    }
    CheckQnnInputs(graph, node);
    Shape inferred = InferShape(node, input_shapes);
    if (inferred != node.shape) {
      TVM_FFI_THROW(ValueError) << Where(node) << ": declared shape " << ShapeText(node.shape)
                                << " but the op computes " << ShapeText(inferred);
    }
    // After shape inference: the channel axis exists in the (now verified) shape.
    if (const auto* qnn = std::get_if<QnnAttrs>(&node.attrs)) CheckQnnChannels(node, *qnn);
    CheckZeroPoint(node, graph.nodes[node.inputs[0]].dtype);
    CheckEmptyOperands(node, input_shapes);
  }
}

}  // namespace example_npu
