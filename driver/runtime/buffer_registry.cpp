// Token encoding: (id << 8) | 0xAE. The tag byte rejects most made-up values; ids never repeat.
#include "runtime/buffer_registry.h"

#include <fmt/format.h>

#include <algorithm>

namespace aethercl {
namespace {

constexpr std::uintptr_t kTag = 0xAE;
constexpr int kTagBits = 8;

}  // namespace

void* BufferRegistry::insert(BufferRecord record) {
  std::lock_guard lock(mutex_);
  std::uint64_t id = next_id_++;
  records_.emplace(id, std::move(record));
  return reinterpret_cast<void*>((static_cast<std::uintptr_t>(id) << kTagBits) | kTag);
}

std::optional<std::uint64_t> BufferRegistry::decode(const void* token,
                                                    TokenProblem* problem) const {
  auto set = [&](TokenProblem value) {
    if (problem) *problem = value;
  };
  auto raw = reinterpret_cast<std::uintptr_t>(token);
  if (raw == 0) {
    set(TokenProblem::kNull);
    return std::nullopt;
  }
  if ((raw & ((std::uintptr_t{1} << kTagBits) - 1)) != kTag) {
    set(TokenProblem::kMalformed);
    return std::nullopt;
  }
  std::uint64_t id = raw >> kTagBits;
  if (id == 0 || id >= next_id_) {
    set(TokenProblem::kNeverIssued);
    return std::nullopt;
  }
  if (records_.find(id) == records_.end()) {
    set(TokenProblem::kReleased);
    return std::nullopt;
  }
  set(TokenProblem::kNone);
  return id;
}

std::optional<BufferRecord> BufferRegistry::find(const void* token, TokenProblem* problem) const {
  std::lock_guard lock(mutex_);
  auto id = decode(token, problem);
  if (!id) return std::nullopt;
  return records_.at(*id);
}

std::optional<BufferUse> BufferRegistry::use(const void* token, int device_index,
                                             std::uint64_t stream_id, TokenProblem* problem) {
  std::lock_guard lock(mutex_);
  auto id = decode(token, problem);
  if (!id) return std::nullopt;
  BufferRecord& record = records_.find(*id)->second;
  if (stream_id != record.block.stream && record.device_index == device_index &&
      std::find(record.used_on.begin(), record.used_on.end(), stream_id) == record.used_on.end()) {
    record.used_on.push_back(stream_id);
  }
  return BufferUse{record.device_index, record.block.mem, record.size};
}

std::optional<BufferRecord> BufferRegistry::remove(const void* token, TokenProblem* problem) {
  std::lock_guard lock(mutex_);
  auto id = decode(token, problem);
  if (!id) return std::nullopt;
  auto node = records_.extract(*id);
  return std::move(node.mapped());
}

std::vector<BufferRecord> BufferRegistry::remove_device(int device_index) {
  std::lock_guard lock(mutex_);
  std::vector<BufferRecord> removed;
  for (auto it = records_.begin(); it != records_.end();) {
    if (it->second.device_index == device_index) {
      removed.push_back(std::move(it->second));
      it = records_.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

bool BufferRegistry::set_label(const void* token, std::string label) {
  std::lock_guard lock(mutex_);
  auto id = decode(token, nullptr);
  if (!id) return false;
  records_.at(*id).label = std::move(label);
  return true;
}

std::size_t BufferRegistry::live_count(int device_index) const {
  std::lock_guard lock(mutex_);
  std::size_t count = 0;
  for (const auto& [id, record] : records_) count += record.device_index == device_index;
  return count;
}

std::uint64_t BufferRegistry::live_bytes(int device_index) const {
  std::lock_guard lock(mutex_);
  std::uint64_t bytes = 0;
  for (const auto& [id, record] : records_)
    if (record.device_index == device_index) bytes += record.size;
  return bytes;
}

bool BufferRegistry::set_dtype(const void* token, int dtype) {
  std::lock_guard lock(mutex_);
  auto id = decode(token, nullptr);
  if (!id) return false;
  records_.at(*id).dtype = dtype;
  return true;
}

std::vector<std::tuple<std::uintptr_t, std::uint64_t, std::string, int>> BufferRegistry::labelled(
    int device_index) const {
  std::lock_guard lock(mutex_);
  std::vector<std::tuple<std::uintptr_t, std::uint64_t, std::string, int>> out;
  for (const auto& [id, record] : records_) {
    if (record.device_index == device_index && (!record.label.empty() || record.dtype >= 0)) {
      out.emplace_back((static_cast<std::uintptr_t>(id) << kTagBits) | kTag, record.size,
                       record.label, record.dtype);
    }
  }
  std::sort(out.begin(), out.end());  // by token: allocation order
  return out;
}

const char* BufferRegistry::describe(TokenProblem problem) {
  switch (problem) {
    case TokenProblem::kNone: return "valid";
    case TokenProblem::kNull: return "is NULL";
    case TokenProblem::kMalformed: return "is not a buffer handle issued by this driver";
    case TokenProblem::kNeverIssued: return "was never issued by this driver";
    case TokenProblem::kReleased: return "was already freed (or released by shutdown_driver)";
  }
  return "is invalid";
}

std::string BufferRegistry::name(const void* token, const std::string& label) {
  std::string text = fmt::format("buffer {}", token);
  if (!label.empty()) text += fmt::format(" ('{}')", label);
  return text;
}

std::string BufferRegistry::name_of(int device_index, cl_mem mem) const {
  std::lock_guard lock(mutex_);
  for (const auto& [id, record] : records_) {
    if (record.device_index == device_index && record.block.mem == mem) {
      return name(reinterpret_cast<const void*>((static_cast<std::uintptr_t>(id) << kTagBits) | kTag),
                  record.label);
    }
  }
  return {};
}

}  // namespace aethercl
