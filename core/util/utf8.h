// UTF-8 (RFC 3629) as the lab reads and writes text: decoding to Unicode code points, strictly
// (a byte that cannot start a character, a character cut short, an overlong form, a surrogate
// U+D800..U+DFFF or a code point past U+10FFFF is invalid, and the error gives the byte offset of
// the character at fault, never the bytes), and encoding code points back. The character model's
// vocabulary is a set of code points, so a vocabulary entry is always a whole character.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace trainlab {

constexpr char32_t kMaxCodePoint = 0x10FFFF;

// The byte offset of the first invalid character of `bytes`, or std::string_view::npos when all of
// it is valid UTF-8; `why` (if given) receives what is wrong there, in words.
size_t utf8_invalid_offset(std::string_view bytes, const char** why = nullptr);

// The code points of `bytes`. Throws Error "<origin>: not valid UTF-8 at byte offset N (...)".
std::u32string decode_utf8(std::string_view bytes, const std::string& origin);

// Appends the UTF-8 form of `cp` (a code point <= U+10FFFF that is not a surrogate; others become
// U+FFFD, the replacement character).
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(std::u32string_view code_points);

// "'é' (U+00E9)" for a printable character, "U+000A" for a control character: how an error
// names a character the user typed.
std::string describe_code_point(char32_t cp);

}  // namespace trainlab
