// Reads and parses AETHERCL_* environment variables.
#include "support/env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

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
