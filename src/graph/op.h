/*!
 * \file graph/op.h
 * \brief NPU operator kinds and their typed attributes.
 *
 * Op names arrive as strings in the graph JSON (the Relax op name without the "relax." prefix).
 * They are parsed exactly once, at graph load, into OpKind plus one typed attribute struct; nothing
 * downstream looks at op-name strings again.
 */
#ifndef EXAMPLE_NPU_GRAPH_OP_H_
#define EXAMPLE_NPU_GRAPH_OP_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "kernels/conv_transpose.h"
#include "kernels/kernels.h"
#include "kernels/norm.h"
#include "kernels/quantize.h"
#include "kernels/quantized_ops.h"
#include "kernels/reduce.h"
#include "kernels/resample.h"
#include "kernels/topk.h"

namespace example_npu {

/*! \brief Element types the graph can carry. */
enum class DType { kFloat32, kFloat16, kInt8, kUInt8, kInt16, kInt32, kInt64 };

std::optional<DType> ParseDType(std::string_view name);
const char* DTypeName(DType dtype);
int64_t DTypeBytes(DType dtype);
/*! \brief The quantized activation types: int8, uint8 and int16. */
bool IsQuantizedDType(DType dtype);
/*! \brief [min, max] of a quantized dtype (IsQuantizedDType); {0, 0} for the others. */
std::pair<int64_t, int64_t> QuantizedRange(DType dtype);

/*! \brief Every operator the NPU graph format can express. */
enum class OpKind {
  kMatmul,
  kPermuteDims,
  kReshape,
  kConv1d,
  kConv2d,
  kMaxPool2d,
  kAvgPool2d,
  kBatchNorm,
  kSoftmax,
  kAdd,
  kSubtract,
  kMultiply,
  kDivide,
  kRelu,
  kClip,
  kSigmoid,
  kTanh,
  kGelu,
  kGeluTanh,
  kQuantize,
  kDequantize,
  kQnnConv2d,
  kQnnConv2dTranspose,
  kQnnMatmul,
  kMaximum,
  kMinimum,
  kConcat,
  kStridedSlice,
  kBroadcastTo,
  kMean,
  kLayerNorm,
  kSqrt,
  kRsqrt,
  kExp,
  kLog,
  kErf,
  kAbs,
  kNegative,
  kRound,
  kFloor,
  kCeil,
  kPower,
  kQnnAdd,
  kQnnMultiply,
  kQnnMaxPool2d,
  kQnnAvgPool2d,
  kQnnConcat,
  kQnnRequantize,
  kQnnLut,
  kQnnSoftmax,
  kResize2d,
  kConv2dTranspose,
  kGroupNorm,
  kInstanceNorm,
  kLeakyRelu,
  kPrelu,
  kSum,
  kMax,
  kMin,
  kVariance,
  kArgmax,
  kArgmin,
  kLogSoftmax,
  kPad,
  kAdaptiveAvgPool2d,
  kTake,
  kCast,
  kTopk,
  kGreater,
  kGreaterEqual,
  kLess,
  kLessEqual,
  kEqual,
  kNotEqual,
  kWhere,
};

/*! \brief Parses a graph op name such as "nn.conv2d"; nullopt for names the NPU does not know. */
std::optional<OpKind> ParseOpKind(std::string_view name);
const char* OpKindName(OpKind kind);

/*!
 * \brief astype (kCast): an integer tensor (int8, uint8, int16, int32, int64) converted to
 * float32 element by element, rounded to nearest even as C++'s and LLVM's int-to-float
 * conversions do (exact up to 2^24 in magnitude), e.g. a tokenizer's int64 attention mask.
 * The other way, float32 to int32 / int64, truncates toward zero as TVM's cast does (the
 * result tile holds the truncated floats and the store narrows them, like argmax's indices):
 * position ids computed from token ids as exact float arithmetic, handed to a gather.
 */
bool IsCastInput(DType dtype);
/*! \brief The integer ops lowered from QDQ chains ("qnn.*"): integer in, integer out. */
bool IsQnnOp(OpKind kind);
/*!
 * \brief The six comparisons (greater ... not_equal): two broadcast float32 inputs in,
 * a float32 0 / 1 mask out, ordered as TVM's LLVM build compares (NaN compares false, not_equal
 * included).
 */
bool IsComparison(OpKind kind);

/*!
 * \brief Ops that only move data (reshape, permute_dims, concat, strided_slice, broadcast_to,
 * take): views or DMA copies, never an engine, so they work for every dtype.
 *
 * take(table, ids) gathers rows with run-time ids: table [V, ...], ids int32 / int64 of rank 1,
 * out[i, ...] = table[ids[i], ...] (an embedding lookup). The DMA reads each id from the ids tile
 * on chip and copies that row; an id outside [0, V) is a ValueError at run time, never a read
 * outside the table. take with constant indices never reaches the graph (it is strided_slice).
 */
bool IsDataMovement(OpKind kind);

/*! \brief Attribute-free ops (elementwise arithmetic, relu, sigmoid, ...). */
struct NoAttrs {};

/*!
 * \brief conv1d and conv2d. conv1d is stored as a conv2d over a height-1 image: NCW -> NCHW,
 * NWC -> NHWC, OIW -> OIHW, WIO -> HWIO, with unit stride/dilation and zero padding in H.
 */
struct ConvAttrs {
  kernels::Conv2dParams params;
};

struct PoolAttrs {
  kernels::Pool2dParams params;
};

struct SoftmaxAttrs {
  int64_t axis = -1;  // normalised to [0, rank) at load
  /*!
   * \brief A row whose every element is -inf gives 0 instead of NaN: PyTorch's "safe softmax"
   * of masked attention (softmax, then where(all(x == -inf), 0, .)), matched as one op.
   */
  bool zero_masked_rows = false;
  /*!
   * \brief Every NaN of the result becomes 0: the ONNX exporter's guard of masked attention,
   * where(isnan(softmax(x)), 0, softmax(x)), matched as one op.
   */
  bool zero_nan = false;
};

/*! \brief clip bounds; either may be -inf / +inf (no bound on that side). */
struct ClipAttrs {
  float min = 0.0f;
  float max = 0.0f;
};

/*! \brief concat of every input along `axis` (normalised at load). */
struct ConcatAttrs {
  int64_t axis = 0;
};

/*!
 * \brief A box of the input, one entry per input dim: out[i] = in[begin + i * step]; the extent
 * is the node's shape. split, strided_slice and take with a scalar index become this.
 */
struct SliceAttrs {
  std::vector<int64_t> begin;
  std::vector<int64_t> step;
};

/*!
 * \brief mean / sum / max / min / variance / argmax / argmin over `axes` (sorted, normalised at
 * load; argmax and argmin take one axis, or all), the reduced dims kept as 1 or dropped.
 */
struct ReduceAttrs {
  std::vector<int64_t> axes;
  bool keepdims = false;
};

/*! \brief The reduction an op computes (a reduction op's kind). */
kernels::ReduceKind ReduceKindOf(OpKind kind);

/*!
 * \brief take with run-time ids: a negative id counts once from the end (id + V) when
 * `negative_from_end` is set, the ONNX importer's Gather fix-up where(less(i, 0), i + V, i).
 */
struct TakeAttrs {
  bool negative_from_end = false;
};

/*!
 * \brief topk along one axis (normalised at load). Relax's topk returns values and indices; each
 * is its own node (`params.indices` says which), both computing the same selection.
 */
struct TopkAttrs {
  /*!
   * \brief A tile's step. kWhole: whole rows in, the result out. A row longer than L1 streams
   * through in chunks (kernels/topk.h): kSelect merges a chunk, numbered from `index_offset`,
   * into the running list (`continuing` after the first), kEmit writes the list's result.
   */
  enum class Step { kWhole, kSelect, kEmit };
  kernels::TopkParams params;
  Step step = Step::kWhole;
  int64_t index_offset = 0;
  bool continuing = false;
};

/*! \brief nn.leakyrelu: x > 0 ? x : x * alpha. */
struct LeakyReluAttrs {
  float alpha = 0.01f;
};

/*! \brief image.resize2d; sizes and tile origins are filled in at load and by the tiling. */
struct ResizeAttrs {
  kernels::Resize2dParams params;
};

/*! \brief nn.pad of every dim; the input shape and tile origins are filled in at load / tiling. */
struct PadAttrs {
  kernels::PadParams params;
};

/*! \brief nn.adaptive_avg_pool2d (any output size; windows may be uneven and overlap). */
struct AdaptivePoolAttrs {
  kernels::AdaptivePoolParams params;
};

/*!
 * \brief nn.conv2d_transpose: the whole op's attributes (Relax's) and the kernel parameters of
 * the tensor or of one tile (origin relative to the tile's boxes).
 */
struct ConvTransposeAttrs {
  std::array<int64_t, 4> padding{0, 0, 0, 0};  // top, left, bottom, right
  std::array<int64_t, 2> output_padding{0, 0};
  kernels::ConvTransposeParams params;
};

/*!
 * \brief nn.group_norm and nn.instance_norm (one channel per group). A tile computes one of two
 * steps over the split space (kernels/norm.h): the statistics of its groups, or their
 * normalisation; `count` is the elements per group.
 */
struct NormAttrs {
  enum class Step { kWhole, kStatistics, kApply };
  kernels::GroupNormParams params;
  Step step = Step::kWhole;
  int64_t count = 0;
  bool accumulate = false;  // kStatistics: add to the statistics of earlier chunks
};

/*!
 * \brief layer_norm over the trailing dims from `first_axis` on (normalised at load); gamma and
 * beta have the normalised dims' shape.
 */
struct LayerNormAttrs {
  std::vector<int64_t> axes;  // as given; NormalizeAxes checks they are the trailing dims
  int64_t first_axis = -1;
  float epsilon = 1e-5f;
  bool center = true;
  bool scale = true;
};

struct BatchNormAttrs {
  int64_t axis = 1;  // normalised to [0, rank) at load
  float epsilon = 1e-5f;
  bool center = true;
  bool scale = true;
};

struct PermuteDimsAttrs {
  std::vector<int64_t> axes;  // empty in JSON means reverse; filled in at load
};

/*! \brief Per-tensor quantize (float -> int) / dequantize (int -> float). */
struct QuantAttrs {
  float scale = 1.0f;
  int64_t zero_point = 0;
  int64_t min = 0;  // quantize: the output dtype's range
  int64_t max = 0;
};

/*!
 * \brief A quantized convolution / matmul: the QDQ chain dequantize -> op (+ bias) (+ relu /
 * clip) -> quantize, lowered by the codegen. requant is derived from the scales at load.
 */
struct QnnAttrs {
  kernels::Conv2dParams conv;     // qnn.conv2d only
  ConvTransposeAttrs transposed;  // qnn.conv2d_transpose only
  double input_scale = 1.0;
  int64_t input_zero_point = 0;
  std::vector<double> weight_scales;  // one, or one per output channel
  int64_t weight_zero_point = 0;      // qnn.matmul of a run-time int8 weight only
  // A float32 qnn.matmul only: the input node whose one element is the zero point, read at run
  // time (DynamicQuantizeLinear's), or -1 for input_zero_point.
  int64_t input_zero_point_node = -1;
  double output_scale = 1.0;
  std::vector<double> bias;  // empty, or one per output channel (float, from the model)
  kernels::Requantization requant;
};

/*! \brief qnn.requantize: (x - zp_in) rescaled to the output, clamped (a fused relu / clip). */
struct QnnRequantizeAttrs {
  kernels::RequantizeParams params;
};

/*! \brief qnn.add / qnn.multiply of two quantized tensors (numpy broadcasting). */
struct QnnBinaryAttrs {
  kernels::QuantizedBinaryParams params;
};

/*! \brief qnn.max_pool2d / qnn.avg_pool2d (global average pooling is a whole-plane window). */
struct QnnPoolAttrs {
  kernels::QuantizedPoolParams params;
};

/*! \brief qnn.concat: every input is requantized to the output's parameters. */
struct QnnConcatAttrs {
  int64_t axis = 0;  // normalised to [0, rank) at load
  std::vector<kernels::RequantizeParams> inputs;
};

/*! \brief qnn.lut: out = table[x - index_offset], the table canonicalize_qdq evaluates from the
 * float function between dequantize and quantize (given in take's x mod 256 order). */
struct QnnLutAttrs {
  kernels::LookupTable table;
};

struct QnnSoftmaxAttrs {
  int64_t axis = -1;  // normalised to [0, rank) at load
  kernels::QuantizedSoftmaxParams params;
};

// One alternative per line, so adding an op's attributes is one line here.
// clang-format off
using OpAttrs = std::variant<
    NoAttrs,
    ConvAttrs,
    PoolAttrs,
    SoftmaxAttrs,
    ClipAttrs,
    BatchNormAttrs,
    PermuteDimsAttrs,
    QuantAttrs,
    QnnAttrs,
    ConcatAttrs,
    SliceAttrs,
    ReduceAttrs,
    LayerNormAttrs,
    QnnRequantizeAttrs,
    QnnBinaryAttrs,
    QnnPoolAttrs,
    QnnConcatAttrs,
    QnnLutAttrs,
    QnnSoftmaxAttrs,
    LeakyReluAttrs,
    ResizeAttrs,
    PadAttrs,
    AdaptivePoolAttrs,
    ConvTransposeAttrs,
    NormAttrs,
    TakeAttrs,
    TopkAttrs>;
// clang-format on

/*! \brief The attributes of nn.conv2d_transpose or qnn.conv2d_transpose (the latter's inside its
 * QnnAttrs). */
inline const ConvTransposeAttrs& TransposedConvAttrsOf(const OpAttrs& attrs) {
  if (const auto* qnn = std::get_if<QnnAttrs>(&attrs)) return qnn->transposed;
  return std::get<ConvTransposeAttrs>(attrs);
}

}  // namespace example_npu

#endif  // EXAMPLE_NPU_GRAPH_OP_H_
