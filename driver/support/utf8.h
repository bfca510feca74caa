// UTF-8 validation: text that leaves the driver (JSON, labels) is always well-formed UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace aethercl {

// Length of the well-formed UTF-8 sequence at the start of text (Unicode table 3-7: no overlong
// forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF), or 0 when it is ill-formed or
// text is empty.
std::size_t utf8_sequence_length(std::string_view text) noexcept;

// text with every ill-formed sequence replaced by U+FFFD, one replacement per maximal subpart
// (the Unicode recommended practice, which Python's "replace" decoding also follows): a lead byte
// followed by some valid continuation bytes and then a bad byte or the end is one U+FFFD; a byte
// that can start no sequence (80..C1, F5..FF) is one U+FFFD.
std::string to_valid_utf8(std::string_view text);

// The longest prefix of text (well-formed UTF-8) of at most max_bytes that does not cut a
// character in half.
std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) noexcept;

}  // namespace aethercl
