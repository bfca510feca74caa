// UTF-8 validation: every class of ill-formed input becomes U+FFFD (one per maximal subpart),
// well-formed text passes unchanged, and JSON escaping always yields well-formed UTF-8.
#include "runtime/device_info.h"
#include "support/utf8.h"

#include <doctest/doctest.h>

#include <string>

using namespace aethercl;

namespace {

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

bool well_formed(const std::string& text) { return to_valid_utf8(text) == text; }

}  // namespace

TEST_CASE("well-formed UTF-8 passes unchanged, boundaries included") {
  for (const std::string& text : {
           std::string("plain ascii ~\x7f"), std::string("\xC2\x80"),  // U+0080
           std::string("\xDF\xBF"),                                    // U+07FF
           std::string("\xE0\xA0\x80"),                                // U+0800
           std::string("\xED\x9F\xBF"),                                // U+D7FF
           std::string("\xEE\x80\x80"),                                // U+E000
           std::string("\xEF\xBF\xBF"),                                // U+FFFF
           std::string("\xF0\x90\x80\x80"),                            // U+10000
           std::string("\xF4\x8F\xBF\xBF"),                            // U+10FFFF
           std::string("caf\xC3\xA9 \xF0\x9F\x99\x82"), std::string()}) {
    CHECK(to_valid_utf8(text) == text);
  }
  CHECK(utf8_sequence_length("\xF4\x8F\xBF\xBF") == 4);
  CHECK(utf8_sequence_length("\xC3\xA9z") == 2);
  CHECK(utf8_sequence_length("") == 0);
}

TEST_CASE("overlong forms are replaced") {
  CHECK(to_valid_utf8("\xC0\xAF") == R + R);
  CHECK(to_valid_utf8("\xC1\xBF") == R + R);
  CHECK(to_valid_utf8("\xE0\x80\xAF") == R + R + R);
  CHECK(to_valid_utf8("\xE0\x9F\xBF") == R + R + R);
  CHECK(to_valid_utf8("\xF0\x80\x80\xAF") == R + R + R + R);
  CHECK(to_valid_utf8("\xF0\x8F\xBF\xBF") == R + R + R + R);
  CHECK(utf8_sequence_length("\xC0\xAF") == 0);
}

TEST_CASE("UTF-16 surrogates are replaced") {
  CHECK(to_valid_utf8("\xED\xA0\x80") == R + R + R);
  CHECK(to_valid_utf8("\xED\xBF\xBF") == R + R + R);
  CHECK(to_valid_utf8("\xED\xA0\xBD\xED\xB2\xA9") == R + R + R + R + R + R);  // CESU-8 pair
  CHECK(utf8_sequence_length("\xED\xA0\x80") == 0);
}

TEST_CASE("code points above U+10FFFF and lead bytes F5..FF are replaced") {
  CHECK(to_valid_utf8("\xF4\x90\x80\x80") == R + R + R + R);
  CHECK(to_valid_utf8("\xF7\xBF\xBF\xBF") == R + R + R + R);
  for (int lead = 0xF5; lead <= 0xFF; ++lead) {
    std::string text = std::string(1, static_cast<char>(lead)) + "\x80z";
    CAPTURE(lead);
    CHECK(to_valid_utf8(text) == R + R + "z");
  }
  CHECK(to_valid_utf8("\xF8\x88\x80\x80\x80") == R + R + R + R + R);
}

TEST_CASE("lone continuation bytes and truncated sequences are replaced, one per subpart") {
  CHECK(to_valid_utf8("\x80") == R);
  CHECK(to_valid_utf8("a\xBF\x80" "b") == "a" + R + R + "b");
  CHECK(to_valid_utf8("\xC3") == R);
  CHECK(to_valid_utf8("\xE2\x82") == R);
  CHECK(to_valid_utf8("\xF0\x9F\x98") == R);
  CHECK(to_valid_utf8("\xE2\x82" "A") == R + "A");
  CHECK(to_valid_utf8("\xF0\x9F\xC3\xA9") == R + "\xC3\xA9");
  CHECK(to_valid_utf8("\xE1\x80\xE2\x82\xAC") == R + "\xE2\x82\xAC");
}

TEST_CASE("utf8_prefix never cuts a character") {
  CHECK(utf8_prefix("abc", 2) == "ab");
  CHECK(utf8_prefix("a\xC3\xA9", 2) == "a");
  CHECK(utf8_prefix("a\xC3\xA9", 3) == "a\xC3\xA9");
  CHECK(utf8_prefix(R + R, 5) == R);
  CHECK(utf8_prefix("\xF0\x9F\x99\x82", 3).empty());
}

TEST_CASE("JSON escaping yields well-formed UTF-8 for any bytes") {
  std::string all_bytes;
  for (int byte = 1; byte < 256; ++byte) all_bytes.push_back(static_cast<char>(byte));
  std::string escaped = json_escape(all_bytes + "\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80");
  CHECK(well_formed(escaped));
  for (unsigned char c : escaped) CHECK(c >= 0x20);
  CHECK(json_escape("q\"\\\n\x01") == "q\\\"\\\\\\n\\u0001");

  DeviceInfo info;
  info.name = "GPU \xC0\xAF";
  info.vendor = "vendor \xFF\xFE";
  info.platform_name = "\xED\xA0\x80";
  std::string json = device_info_json(info, 0, false);
  CHECK(well_formed(json));
  CHECK(json.find("\"name\": \"GPU " + R + R + "\"") != std::string::npos);
}
