/*!
 * \file support/json_input.h
 * \brief Untrusted JSON in, safe error messages out.
 *
 * Graph JSON, module bytes and NPUConfig JSON may come from anywhere (a file, a network, a
 * fuzzer). tvm-ffi's JSON parser recurses once per nesting level, so deeply nested input would
 * overflow the stack: the nesting depth is checked by a flat scan first. Text must be valid
 * UTF-8, and anything of the input echoed in an error message goes through Printable(), so
 * messages are short printable ASCII that every Python caller can decode.
 */
#ifndef EXAMPLE_NPU_SUPPORT_JSON_INPUT_H_
#define EXAMPLE_NPU_SUPPORT_JSON_INPUT_H_

#include <tvm/ffi/extra/json.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace example_npu {

/*! \brief Deepest array / object nesting accepted (an NPU graph needs 5 levels). */
constexpr int kMaxJsonDepth = 32;

/*! \brief Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or > U+10FFFF). */
bool IsValidUtf8(std::string_view text);

/*!
 * \brief Parses JSON from an untrusted source. Throws ValueError naming `what` when the text is
 * not UTF-8, nests deeper than kMaxJsonDepth, or is not valid JSON.
 */
tvm::ffi::json::Value ParseUntrustedJson(std::string_view text, const std::string& what);

/*!
 * \brief `text` for an error message: printable ASCII kept, every other byte as \xNN, and cut
 * to `max_chars` (with "..." appended) so a huge or binary value cannot flood the message.
 */
std::string Printable(std::string_view text, size_t max_chars = 64);

/*!
 * \brief A shape for an error message, "(2, 3)" (a 1-D shape "(4,)"): at most `max_dims` dims
 * are written, then "..." and the rank, so a declared shape of 100,000 dims stays one line.
 */
std::string ShapeText(const int64_t* dims, size_t rank, size_t max_dims = 8);
inline std::string ShapeText(const std::vector<int64_t>& dims) {
  return ShapeText(dims.data(), dims.size());
}

/*!
 * \brief The longest error message the runtime raises: longer ones are cut (whatever built
 * them), so every message stays short enough to print.
 */
constexpr size_t kMaxErrorChars = 1000;

}  // namespace example_npu

#endif  // EXAMPLE_NPU_SUPPORT_JSON_INPUT_H_
