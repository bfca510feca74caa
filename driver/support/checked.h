// Overflow-safe size arithmetic for argument validation (compiler builtins where available).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace aethercl {

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
#if defined(__GNUC__) || defined(__clang__)
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
#else
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
#endif
}

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
#if defined(__GNUC__) || defined(__clang__)
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::nullopt;
  return sum;
#else
  if (b > std::numeric_limits<std::uint64_t>::max() - a) return std::nullopt;
  return a + b;
#endif
}

}  // namespace aethercl
