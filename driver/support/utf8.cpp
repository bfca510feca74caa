// Full UTF-8 validation with U+FFFD replacement (Unicode 15, section 3.9, table 3-7).
#include "support/utf8.h"

namespace aethercl {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The bytes a well-formed sequence may have in second position after lead, and its length;
// {0, 0, 0} when lead starts no multi-byte sequence. Later continuation bytes are 80..BF.
struct LeadRule {
  std::size_t length;
  unsigned char second_min;
  unsigned char second_max;
};

LeadRule lead_rule(unsigned char lead) noexcept {
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};  // below A0: overlong
  if (lead == 0xED) return {3, 0x80, 0x9F};  // above 9F: surrogates
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};  // below 90: overlong
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};  // above 8F: beyond U+10FFFF
  return {0, 0, 0};                          // 80..C1 and F5..FF
}

// How many bytes from the start of text form a valid sequence (complete: its length) or the
// maximal subpart of one (incomplete: 1 to length-1, at least 1 for any non-empty text).
struct Scan {
  std::size_t bytes;
  bool complete;
};

Scan scan(std::string_view text) noexcept {
  const auto lead = static_cast<unsigned char>(text[0]);
  if (lead < 0x80) return {1, true};
  LeadRule rule = lead_rule(lead);
  if (rule.length == 0) return {1, false};
  std::size_t i = 1;
  for (; i < rule.length && i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const unsigned char low = i == 1 ? rule.second_min : 0x80;
    const unsigned char high = i == 1 ? rule.second_max : 0xBF;
    if (byte < low || byte > high) return {i, false};
  }
  return {i, i == rule.length};
}

}  // namespace

std::size_t utf8_sequence_length(std::string_view text) noexcept {
  if (text.empty()) return 0;
  Scan result = scan(text);
  return result.complete ? result.bytes : 0;
}

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    Scan result = scan(text);
    if (result.complete) out.append(text.substr(0, result.bytes));
    else out.append(kReplacement);
    text.remove_prefix(result.bytes);
  }
  return out;
}

std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) noexcept {
  std::size_t end = 0;
  while (end < text.size()) {
    std::size_t length = utf8_sequence_length(text.substr(end));
    if (length == 0) length = 1;  // not well-formed: keep the byte (callers pass valid text)
    if (end + length > max_bytes) break;
    end += length;
  }
  return text.substr(0, end);
}

}  // namespace aethercl
