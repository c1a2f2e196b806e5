#include "support/json_input.h"

#include <tvm/ffi/error.h>

#include <cstdint>

namespace example_npu {
namespace {

/*! \brief Byte offset of the first place nesting exceeds kMaxJsonDepth, or npos. */
size_t FirstTooDeep(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

/*! \brief Byte offset of the first invalid UTF-8 sequence, or npos. */
size_t FirstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int length = 0;
    uint32_t code = 0;
    uint32_t min_code = 0;
    if ((c & 0xE0) == 0xC0) {
      length = 2, code = c & 0x1F, min_code = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code = c & 0x0F, min_code = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code = c & 0x07, min_code = 0x10000;
    } else {
      return i;
    }
    if (n - i < static_cast<size_t>(length)) return i;
    for (int k = 1; k < length; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::string_view::npos;
}

}  // namespace

bool IsValidUtf8(std::string_view text) { return FirstInvalidUtf8(text) == std::string_view::npos; }

tvm::ffi::json::Value ParseUntrustedJson(std::string_view text, const std::string& what) {
  if (size_t at = FirstInvalidUtf8(text); at != std::string_view::npos) {
    TVM_FFI_THROW(ValueError) << what << " is not valid UTF-8 (byte " << at << ")";
  }
  if (size_t at = FirstTooDeep(text); at != std::string_view::npos) {
    TVM_FFI_THROW(ValueError) << what << " nests arrays/objects deeper than " << kMaxJsonDepth
                              << " levels (byte " << at << ")";
  }
  tvm::ffi::String error;
  tvm::ffi::json::Value value =
      tvm::ffi::json::Parse(tvm::ffi::String(text.data(), text.size()), &error);
  if (!error.empty()) {
    TVM_FFI_THROW(ValueError) << what << " is not valid JSON: "
                              << Printable(std::string_view(error.data(), error.size()), 200);
  }
  return value;
}

std::string Printable(std::string_view text, size_t max_chars) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::string ShapeText(const int64_t* dims, size_t rank, size_t max_dims) {
  std::string out = "(";
  for (size_t i = 0; i < rank; ++i) {
    if (i == max_dims) {
      out += ", ... (" + std::to_string(rank) + " dims)";
      break;
    }
    out += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return out + (rank == 1 ? ",)" : ")");
}

}  // namespace example_npu
