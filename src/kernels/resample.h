/*!
 * \file kernels/resample.h
 * \brief Index-mapped data movement of the DMA / vector / pooling units: resize2d (nearest and
 * bilinear upsampling), pad (constant, reflect, replicate, circular) and adaptive average
 * pooling with uneven windows.
 *
 * Each output index along an axis reads a few input indices that depend on that index alone, so
 * a tile of the output reads one box of the input. The kernels run on such tiles: the params
 * carry the whole tensor's sizes (which fix the index map) and where the tile's output and input
 * boxes begin in the whole tensors. The *SourceRange functions give the input box of an output
 * range, for the compiler's tiling and for the kernels' own bounds checks. Every formula follows
 * TVM's topi (resize2d, nn.pad / reflect_pad / replicate_pad / circular_pad, adaptive_pool) in
 * float32, step by step, so results equal TVM's LLVM build bit for bit; bilinear resizing of a
 * TFLite model's integers follows TFLite's int8 kernel instead (Resize2dParams::tflite_integer).
 */
#ifndef EXAMPLE_NPU_KERNELS_RESAMPLE_H_
#define EXAMPLE_NPU_KERNELS_RESAMPLE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/window.h"

namespace example_npu {
namespace kernels {

enum class ResizeMethod { kNearest, kLinear };

/*! \brief How an output coordinate maps to the input (ONNX / TVM coordinate_transformation_mode).
 */
enum class CoordinateMode {
  kHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kPytorchHalfPixel,
  kTfHalfPixelForNn,
};

/*! \brief How nearest-neighbour resizing rounds a source coordinate to an index. */
enum class NearestRounding { kRound, kFloor, kCeil, kRoundPreferFloor, kRoundPreferCeil };

/*! \brief 2-D resize of an NCHW or NHWC tensor; sizes are {H, W}. */
struct Resize2dParams {
  DataLayout layout = DataLayout::kNCHW;
  ResizeMethod method = ResizeMethod::kNearest;
  CoordinateMode mode = CoordinateMode::kHalfPixel;
  NearestRounding rounding = NearestRounding::kFloor;
  std::array<int64_t, 2> in_size{1, 1};    // of the whole input
  std::array<int64_t, 2> out_size{1, 1};   // of the whole output
  std::array<int64_t, 2> in_begin{0, 0};   // first input row / column of the tile
  std::array<int64_t, 2> out_begin{0, 0};  // first output row / column of the tile
  /*! Linear only: TFLite's int8 RESIZE_BILINEAR (reference_ops::ResizeBilinear on int8) for a
   * TFLite model's integers. The scale and source coordinate are 10-bit fixed point (kHalfPixel
   * is half_pixel_centers, kAlignCorners align_corners, kAsymmetric neither), the four taps'
   * weights are products of 10-bit weights, and the sum is rounded once, half away from zero. */
  bool tflite_integer = false;
};

/*! \brief Input indices [begin, end) of spatial axis `axis` (0: H, 1: W) that the outputs
 * [out_first, out_end) read (nearest: one each; linear: two, clamped to the input). */
Range ResizeSourceRange(const Resize2dParams& p, int axis, int64_t out_first, int64_t out_end);

/*!
 * \brief out = resize2d(input) on a tile: in_shape / out_shape are the tile's (4-D, p.layout);
 * the input tile must hold ResizeSourceRange of the output tile.
 */
void Resize2d(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
              const Resize2dParams& p);

enum class PadMode { kConstant, kReflect, kReplicate, kCircular };

/*! \brief N-D padding; before / after / in_shape per dim of the whole input. */
struct PadParams {
  PadMode mode = PadMode::kConstant;
  float value = 0.0f;  // constant mode
  std::vector<int64_t> before;
  std::vector<int64_t> after;
  Shape in_shape;                  // of the whole input
  std::vector<int64_t> in_begin;   // the tile's first input index per dim
  std::vector<int64_t> out_begin;  // the tile's first output index per dim
};

/*!
 * \brief The input index output index `o` of dim `dim` reads, or -1 (constant padding). Valid
 * for reflect padding narrower than the dim (TVM's reflect_pad reflects once).
 */
int64_t PadSource(const PadParams& p, size_t dim, int64_t o);

/*! \brief Input indices of dim `dim` read by outputs [out_first, out_end); empty if none. */
Range PadSourceRange(const PadParams& p, size_t dim, int64_t out_first, int64_t out_end);

/*! \brief out = pad(input) on a tile (shapes are the tile's, every dim of the tensor). */
void Pad(const float* input, const Shape& in_shape, float* out, const Shape& out_shape,
         const PadParams& p);

/*! \brief Adaptive average pooling over H and W of an NCHW or NHWC tensor; sizes are {H, W}. */
struct AdaptivePoolParams {
  DataLayout layout = DataLayout::kNCHW;
  std::array<int64_t, 2> in_size{1, 1};
  std::array<int64_t, 2> out_size{1, 1};
  std::array<int64_t, 2> in_begin{0, 0};
  std::array<int64_t, 2> out_begin{0, 0};
};

/*! \brief The window of output `o` along an axis: [floor(o * in / out), ceil((o + 1) * in / out)).
 */
Range AdaptiveWindow(int64_t o, int64_t in, int64_t out);

/*! \brief Input indices of axis `axis` read by outputs [out_first, out_end). */
Range AdaptiveSourceRange(const AdaptivePoolParams& p, int axis, int64_t out_first,
                          int64_t out_end);

/*! \brief out = adaptive_avg_pool2d(input) on a tile: the window sum in row-major order, divided
 * by the window's tap count as a float (TVM's adaptive_pool_avg). */
void AdaptiveAvgPool2d(const float* input, const Shape& in_shape, float* out,
                       const Shape& out_shape, const AdaptivePoolParams& p);

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_RESAMPLE_H_
