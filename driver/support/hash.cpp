// FNV-1a with two seeds; the field separator keeps ("ab","c") and ("a","bc") apart.
#include "support/hash.h"

#include <fmt/format.h>

namespace aethercl {

Hasher& Hasher::add(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  constexpr std::uint64_t kPrime = 0x100000001b3ull;
  for (std::size_t i = 0; i < size; ++i) {
    low_ = (low_ ^ bytes[i]) * kPrime;
    high_ = (high_ ^ bytes[i]) * kPrime + 0x9e3779b97f4a7c15ull;
  }
  low_ = (low_ ^ 0xff) * kPrime;
  high_ = (high_ ^ size) * kPrime;
  return *this;
}

Hasher& Hasher::add(std::string_view bytes) { return add(bytes.data(), bytes.size()); }

std::string Hasher::hex() const { return fmt::format("{:016x}{:016x}", high_, low_); }

}  // namespace aethercl
