// Buffer registry: opaque, never-reused tokens mapped to device buffers. Tokens are validated on
// every use, so a stale, foreign or made-up value is an error, never a dereference.
#pragma once

#include "runtime/memory_pool.h"

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace aethercl {

struct BufferRecord {
  int device_index = -1;   // visible index of the owning device
  PoolBlock block;         // block.stream: the stream it was allocated on
  std::uint64_t size = 0;  // bytes the client asked for; the only bytes it may touch
  std::string label;
  // Streams other than block.stream that commands using the buffer were issued on: at the free,
  // the block waits for them (runtime/memory_pool.h).
  std::vector<std::uint64_t> used_on = {};
  int dtype = -1;  // an aethercl_dtype code set by aethercl_buffer_set_dtype, -1 if none
};

// What a command needs of a buffer.
struct BufferUse {
  int device_index = -1;
  cl_mem mem = nullptr;
  std::uint64_t size = 0;
};

// Why a token did not resolve.
enum class TokenProblem { kNone, kNull, kMalformed, kNeverIssued, kReleased };

class BufferRegistry {
 public:
  void* insert(BufferRecord record);
  // Copies the record out; thread-safe.
  std::optional<BufferRecord> find(const void* token, TokenProblem* problem = nullptr) const;
  // The buffer for a command on stream stream_id of device device_index, noting the stream in
  // used_on when it is not the buffer's own and the buffer belongs to that device; thread-safe.
  std::optional<BufferUse> use(const void* token, int device_index, std::uint64_t stream_id,
                               TokenProblem* problem);
  std::optional<BufferRecord> remove(const void* token, TokenProblem* problem = nullptr);
  // Removes and returns every record of a device (shutdown).
  std::vector<BufferRecord> remove_device(int device_index);
  bool set_label(const void* token, std::string label);
  bool set_dtype(const void* token, int dtype);
  std::size_t live_count(int device_index) const;
  std::uint64_t live_bytes(int device_index) const;
  // (token, size, label, dtype) of the device's buffers that have a label or a dtype.
  std::vector<std::tuple<std::uintptr_t, std::uint64_t, std::string, int>> labelled(
      int device_index) const;

  static const char* describe(TokenProblem problem);
  // How reports name a buffer: "buffer 0x<token>", with " ('label')" when it has one.
  static std::string name(const void* token, const std::string& label);
  // The name of the device's live buffer whose block is mem; empty when none is.
  std::string name_of(int device_index, cl_mem mem) const;

 private:
  std::optional<std::uint64_t> decode(const void* token, TokenProblem* problem) const;

  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, BufferRecord> records_;  // id -> record
  std::uint64_t next_id_ = 1;  // monotonic for the life of the process, across shutdowns
};

}  // namespace aethercl
