// The calling thread's current stream per device: a small thread-local table.
#include "runtime/stream.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace aethercl {
namespace {

// (device index, stream id) pairs; only devices whose current stream was set appear.
thread_local std::vector<std::pair<int, std::uint64_t>> tls_current;

}  // namespace

std::uint64_t current_stream_id(int device_index) noexcept {
  for (const auto& [index, id] : tls_current) {
    if (index == device_index) return id;
  }
  return 0;
}

void set_current_stream_id(int device_index, std::uint64_t id) {
  auto it = std::find_if(tls_current.begin(), tls_current.end(),
                         [&](const auto& entry) { return entry.first == device_index; });
  if (it != tls_current.end()) {
    if (id == 0) tls_current.erase(it);
    else it->second = id;
  } else if (id != 0) {
    tls_current.emplace_back(device_index, id);
  }
}

}  // namespace aethercl
