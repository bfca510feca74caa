// Hashing for cache keys and checksums: 128-bit (two seeded 64-bit FNV-1a lanes), hex output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace aethercl {

class Hasher {
 public:
  Hasher& add(std::string_view bytes);
  Hasher& add(const void* data, std::size_t size);
  std::string hex() const;
  std::uint64_t low() const { return low_; }

 private:
  std::uint64_t low_ = 0xcbf29ce484222325ull;
  std::uint64_t high_ = 0x84222325cbf29ce4ull;
};

}  // namespace aethercl
