#include "util/utf8.h"

#include <cstdio>

#include "util/error.h"

namespace trainlab {

namespace {

// One character at `bytes[i]`: its code point and length, or nullptr `why` when valid.
struct Decoded {
  char32_t cp = 0;
  size_t len = 0;
  const char* why = nullptr;
};

Decoded decode_one(std::string_view bytes, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(bytes[i + k]); };
  const unsigned char lead = b(0);
  if (lead < 0x80) return {lead, 1, nullptr};
  size_t len = 0;
  char32_t cp = 0, min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2, cp = lead & 0x1Fu, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3, cp = lead & 0x0Fu, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4, cp = lead & 0x07u, min = 0x10000;
  } else if (lead >= 0x80 && lead <= 0xBF) {
    return {0, 0, "a continuation byte where a character should start"};
  } else {
    return {0, 0, "a byte that never occurs in UTF-8"};
  }
  if (bytes.size() - i < len) return {0, 0, "a multi-byte character cut short by the end of the text"};
  for (size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0u) != 0x80u) return {0, 0, "a multi-byte character cut short"};
    cp = (cp << 6) | (b(k) & 0x3Fu);
  }
  if (cp < min) return {0, 0, "an overlong encoding"};
  if (cp >= 0xD800 && cp <= 0xDFFF) return {0, 0, "a UTF-16 surrogate"};
  if (cp > kMaxCodePoint) return {0, 0, "a code point past U+10FFFF"};
  return {cp, len, nullptr};
}

}  // namespace

size_t utf8_invalid_offset(std::string_view bytes, const char** why) {
  for (size_t i = 0; i < bytes.size();) {
    const Decoded d = decode_one(bytes, i);
    if (d.why) {
      if (why) *why = d.why;
      return i;
    }
    i += d.len;
  }
  return std::string_view::npos;
}

std::u32string decode_utf8(std::string_view bytes, const std::string& origin) {
  std::u32string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const Decoded d = decode_one(bytes, i);
    if (d.why)
      throw Error(origin + ": not valid UTF-8 at byte offset " + std::to_string(i) + " (" + d.why +
                  "; expected UTF-8 text)");
    out.push_back(d.cp);
    i += d.len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t cp : code_points) append_utf8(out, cp);
  return out;
}

std::string describe_code_point(char32_t cp) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(cp));
  const bool control = cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029;
  if (control || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return hex;
  std::string s = "'";
  append_utf8(s, cp);
  return s + "' (" + hex + ")";
}

}  // namespace trainlab
