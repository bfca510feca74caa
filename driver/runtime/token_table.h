// Typed opaque tokens for the objects of version 3 (streams, events, programs, kernels): (id << 8) | tag, ids
// never reused, so a stale, foreign, wrong-typed or made-up value is refused by name and never
// dereferenced. Buffers keep their own registry (runtime/buffer_registry.h) with the same scheme.
#pragma once

#include "support/error.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace aethercl {

// One tag byte per token type; describe_token_tag names the type for messages.
namespace token_tag {
inline constexpr std::uint8_t kBuffer = 0xAE;
inline constexpr std::uint8_t kStream = 0xA5;
inline constexpr std::uint8_t kEvent = 0xA7;
inline constexpr std::uint8_t kComm = 0xC0;  // runtime/communicator.h
inline constexpr std::uint8_t kProgram = 0xB1;
inline constexpr std::uint8_t kKernel = 0xB2;
inline constexpr std::uint8_t kGraph = 0xB3;  // runtime/graph.h
}  // namespace token_tag

// "a buffer handle", "a stream", "an event", "a communicator", "a program", "a kernel", or nullptr
// for a byte no
// token type uses.
const char* describe_token_tag(std::uint8_t tag) noexcept;

template <typename T>
class TokenTable {
 public:
  // noun: what the tokens are called in messages ("stream", "event").
  TokenTable(std::uint8_t tag, const char* noun) : tag_(tag), noun_(noun) {}

  void* insert(std::shared_ptr<T> object) {
    std::lock_guard lock(mutex_);
    std::uint64_t id = next_id_++;
    objects_.emplace(id, std::move(object));
    return encode(id);
  }

  // The live object behind token. Throws kInvalidArgument for NULL and kInvalidHandle for any
  // other token that names no live object of this type; argument names the parameter.
  std::shared_ptr<T> get(const void* token, const char* argument) const {
    std::lock_guard lock(mutex_);
    return objects_.at(decode(token, argument));
  }

  // As get(), and the token is dead from then on.
  std::shared_ptr<T> remove(const void* token, const char* argument) {
    std::lock_guard lock(mutex_);
    auto node = objects_.extract(decode(token, argument));
    return std::move(node.mapped());
  }

  // Removes every object for which predicate holds (shutdown of a device).
  template <typename Predicate>
  std::vector<std::shared_ptr<T>> remove_if(Predicate predicate) {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<T>> removed;
    for (auto it = objects_.begin(); it != objects_.end();) {
      if (predicate(*it->second)) {
        removed.push_back(std::move(it->second));
        it = objects_.erase(it);
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
    for (const auto& [id, object] : objects_) count += predicate(*object) ? 1 : 0;
    return count;
  }

  void* encode(std::uint64_t id) const {
    return reinterpret_cast<void*>((static_cast<std::uintptr_t>(id) << 8) | tag_);
  }

 private:
  std::uint64_t decode(const void* token, const char* argument) const {
    auto raw = reinterpret_cast<std::uintptr_t>(token);
    if (raw == 0) fail(Status::kInvalidArgument, "{} is NULL", argument);
    auto tag = static_cast<std::uint8_t>(raw & 0xFF);
    if (tag != tag_) {
      const char* other = describe_token_tag(tag);
      if (other != nullptr) {
        fail(Status::kInvalidHandle, "{} ({}) is {}, not {}", argument, token, other,
             describe_token_tag(tag_));
      }
      fail(Status::kInvalidHandle, "{} ({}) is not a {} handle", argument, token, noun_);
    }
    std::uint64_t id = raw >> 8;
    if (id == 0 || id >= next_id_) {
      fail(Status::kInvalidHandle, "{} ({}) is a {} handle that was never issued", argument,
           token, noun_);
    }
    if (objects_.count(id) == 0) {
      fail(Status::kInvalidHandle, "{} ({}) names a {} that was destroyed", argument, token,
           noun_);
    }
    return id;
  }

  std::uint8_t tag_;
  const char* noun_;
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<T>> objects_;
  std::uint64_t next_id_ = 1;  // monotonic for the life of the process
};

}  // namespace aethercl
