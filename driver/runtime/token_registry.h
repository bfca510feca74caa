// Typed tokens for the driver's opaque objects (programs, kernels, ...): (id << 8) | tag, with ids
// never reused and one tag byte per object type, so a token of the wrong type, a destroyed one, a
// made-up one and a host pointer are each refused with a message instead of dereferenced.
#pragma once

#include "support/error.h"

#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace aethercl {

// Tag bytes of every token type the driver issues (buffers keep their historic 0xAE).
namespace token_tag {
inline constexpr std::uint8_t kBuffer = 0xAE;
inline constexpr std::uint8_t kProgram = 0xB1;
inline constexpr std::uint8_t kKernel = 0xB2;
}  // namespace token_tag

// "a buffer handle", "a kernel token", ... for a tag byte; nullptr for a tag no type uses.
const char* token_type_of_tag(std::uint8_t tag) noexcept;

template <typename Record>
class TokenRegistry {
 public:
  // type: "program", "kernel" (for messages).
  TokenRegistry(std::uint8_t tag, const char* type) : tag_(tag), type_(type) {}

  void* insert(Record record) {
    std::lock_guard lock(mutex_);
    std::uint64_t id = next_id_++;
    records_.emplace(id, std::move(record));
    return reinterpret_cast<void*>((static_cast<std::uintptr_t>(id) << 8) | tag_);
  }

  // The record of a live token; throws kInvalidArgument for NULL and kInvalidHandle otherwise,
  // the message naming `argument`.
  Record find(const void* token, const char* argument) const {
    std::lock_guard lock(mutex_);
    return records_.at(decode(token, argument));
  }

  Record remove(const void* token, const char* argument) {
    std::lock_guard lock(mutex_);
    auto node = records_.extract(decode(token, argument));
    return std::move(node.mapped());
  }

  // Removes and returns every record for which keep(record) is false (shutdown of a device).
  template <typename Predicate>
  std::vector<Record> remove_if(Predicate predicate) {
    std::lock_guard lock(mutex_);
    std::vector<Record> removed;
    for (auto it = records_.begin(); it != records_.end();) {
      if (predicate(it->second)) {
        removed.push_back(std::move(it->second));
        it = records_.erase(it);
      } else {
        ++it;
      }
    }
    return removed;
  }

  template <typename Predicate>
  std::size_t count_if(Predicate predicate) const {
    std::lock_guard lock(mutex_);
    std::size_t count = 0;
    for (const auto& [id, record] : records_) count += predicate(record) ? 1 : 0;
    return count;
  }

 private:
  std::uint64_t decode(const void* token, const char* argument) const {
    auto raw = reinterpret_cast<std::uintptr_t>(token);
    if (raw == 0) fail(Status::kInvalidArgument, "{} is NULL", argument);
    auto tag = static_cast<std::uint8_t>(raw & 0xFF);
    if (tag != tag_) {
      const char* other = token_type_of_tag(tag);
      if (other != nullptr) {
        fail(Status::kInvalidHandle, "{} ({}) is {}, not a {} token", argument, token, other,
             type_);
      }
      fail(Status::kInvalidHandle, "{} ({}) is not a {} token issued by this driver", argument,
           token, type_);
    }
    std::uint64_t id = raw >> 8;
    if (id == 0 || id >= next_id_) {
      fail(Status::kInvalidHandle, "{} ({}) was never issued by this driver", argument, token);
    }
    if (records_.find(id) == records_.end()) {
      fail(Status::kInvalidHandle,
           "{} ({}) was already destroyed (or released by shutdown_driver)", argument, token);
    }
    return id;
  }

  const std::uint8_t tag_;
  const char* const type_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, Record> records_;
  std::uint64_t next_id_ = 1;  // monotonic for the life of the process, across shutdowns
};

}  // namespace aethercl
