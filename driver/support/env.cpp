// Reads and strictly parses AETHERCL_* environment variables; malformed values warn once.
#include "support/env.h"

#include "support/log.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <set>

namespace aethercl::env {
namespace {

std::string trimmed(const std::string& text) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  auto begin = std::find_if_not(text.begin(), text.end(), space);
  auto end = std::find_if_not(text.rbegin(), std::string::const_reverse_iterator(begin), space).base();
  return std::string(begin, end);
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Never destroyed, like the logger: variables may still be read during exit.
std::mutex& reported_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

std::set<std::string>& reported() {
  static auto* names = new std::set<std::string>();
  return *names;
}

// The unit's power of 1024, or -1: "", "b" -> 0; "k", "kb", "kib" -> 1; … "t…" -> 4.
int unit_power(const std::string& unit) {
  static const std::string letters = "kmgt";
  if (unit.empty() || unit == "b") return 0;
  std::size_t power = letters.find(unit[0]);
  if (power == std::string::npos) return -1;
  std::string rest = unit.substr(1);
  if (rest.empty() || rest == "b" || rest == "ib") return static_cast<int>(power) + 1;
  return -1;
}

}  // namespace

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool claim_report(const char* name) {
  std::lock_guard lock(reported_mutex());
  return reported().insert(name).second;
}

void report_malformed(const char* name, const std::string& value, const std::string& expected,
                      const std::string& consequence) {
  if (!claim_report(name)) return;
  log().warn("{}='{}' is not {}; {}", name, value, expected, consequence);
}

bool was_reported(const char* name) {
  std::lock_guard lock(reported_mutex());
  return reported().count(name) != 0;
}

std::optional<bool> parse_flag(const std::string& text) {
  std::string value = lowercase(trimmed(text));
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  return std::nullopt;
}

std::optional<std::uint64_t> parse_count(const std::string& text) {
  std::string value = trimmed(text);
  std::uint64_t number = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (value.empty() || error != std::errc() || end != value.data() + value.size()) {
    return std::nullopt;
  }
  return number;
}

std::optional<std::uint64_t> parse_bytes(const std::string& text) {
  std::string value = lowercase(trimmed(text));
  std::size_t digits = 0;
  while (digits < value.size() && (std::isdigit(static_cast<unsigned char>(value[digits])) ||
                                   value[digits] == '.')) {
    ++digits;
  }
  std::string number = value.substr(0, digits);
  int power = unit_power(trimmed(value.substr(digits)));
  if (number.empty() || power < 0 || std::count(number.begin(), number.end(), '.') > 1 ||
      number.front() == '.' || number.back() == '.') {
    return std::nullopt;
  }
  if (number.find('.') == std::string::npos) {
    auto whole = parse_count(number);
    if (!whole || *whole > (UINT64_MAX >> (10 * power))) return std::nullopt;
    return *whole << (10 * power);
  }
  if (power == 0) return std::nullopt;  // "1.5" bytes means nothing
  double scaled = std::strtod(number.c_str(), nullptr) * std::ldexp(1.0, 10 * power);
  if (!std::isfinite(scaled) || scaled >= 18446744073709551615.0) return std::nullopt;
  return static_cast<std::uint64_t>(std::llround(scaled));
}

bool flag(const char* name, bool fallback) {
  auto value = get(name);
  if (!value) return fallback;
  if (auto parsed = parse_flag(*value)) return *parsed;
  report_malformed(name, *value, "a boolean (1/0, true/false, yes/no, on/off)",
                   fmt::format("using the default, {}", fallback ? 1 : 0));
  return fallback;
}

std::optional<std::uint64_t> bytes(const char* name, std::uint64_t minimum) {
  auto value = get(name);
  if (!value) return std::nullopt;
  auto parsed = parse_bytes(*value);
  if (parsed && *parsed >= minimum) return parsed;
  report_malformed(name, *value,
                   minimum > 0 ? fmt::format("a size of at least {} byte(s) (e.g. 512M, 1.5G)", minimum)
                               : std::string("a size (e.g. 4096, 512M, 1.5G)"),
                   "ignoring it");
  return std::nullopt;
}

std::optional<std::uint64_t> count(const char* name, std::uint64_t minimum, std::uint64_t maximum) {
  auto value = get(name);
  if (!value) return std::nullopt;
  auto parsed = parse_count(*value);
  if (parsed && *parsed >= minimum && *parsed <= maximum) return parsed;
  report_malformed(name, *value, fmt::format("a whole number from {} to {}", minimum, maximum),
                   "ignoring it");
  return std::nullopt;
}

std::vector<std::string> list(const char* name) {
  std::vector<std::string> entries;
  auto value = get(name);
  if (!value) return entries;
  bool empty_entry = false;
  std::size_t start = 0;
  while (start <= value->size()) {
    std::size_t comma = std::min(value->find(',', start), value->size());
    std::string entry = trimmed(value->substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) {
      empty_entry = true;
    } else {
      entries.push_back(std::move(entry));
    }
  }
  if (empty_entry) {
    report_malformed(name, *value, "a comma-separated list without empty entries",
                     "ignoring the empty entries");
  }
  return entries;
}

}  // namespace aethercl::env
