// Reads and parses AETHERCL_* environment variables.
#include "support/env.h"

#include "support/log.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <set>

namespace aethercl::env {

std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool flag(const char* name, bool fallback) {
  auto value = get(name);
  if (!value) return fallback;
  std::string lower = *value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "1" || lower == "true" || lower == "yes" || lower == "on") return true;
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return false;
  return fallback;
}

std::optional<std::uint64_t> bytes(const char* name) {
  auto value = get(name);
  if (!value) return std::nullopt;
  char* end = nullptr;
  unsigned long long number = std::strtoull(value->c_str(), &end, 10);
  if (end == value->c_str()) return std::nullopt;
  std::uint64_t scale = 1;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case 'K': scale = 1ull << 10; break;
    case 'M': scale = 1ull << 20; break;
    case 'G': scale = 1ull << 30; break;
    case '\0': break;
    default: return std::nullopt;
  }
  if (number > UINT64_MAX / scale) return std::nullopt;
  return number * scale;
}

}  // namespace aethercl::env

namespace aethercl::env {

std::optional<std::uint64_t> count(const char* name) {
  auto value = get(name);
  if (!value) return std::nullopt;
  const std::string& text = *value;
  bool digits = !text.empty() && text.size() <= 19 &&
                std::all_of(text.begin(), text.end(),
                            [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!digits) {
    // Read on every call: warn once per variable and value.
    static std::mutex mutex;
    static std::set<std::string> warned;
    std::lock_guard lock(mutex);
    if (warned.insert(std::string(name) + "=" + text).second) {
      log().warn("{}='{}' is not a plain non-negative integer; ignored", name, text);
    }
    return std::nullopt;
  }
  return std::strtoull(text.c_str(), nullptr, 10);
}

}  // namespace aethercl::env
