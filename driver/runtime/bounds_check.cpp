// Guard-zone bookkeeping, the launch history and the report of a damaged guard.
#include "runtime/bounds_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>
#include <tuple>

namespace aethercl {
namespace {

std::string stream_name(std::uintptr_t stream) {
  return stream == 0 ? std::string("the default stream") : fmt::format("stream 0x{:x}", stream);
}

}  // namespace

const unsigned char* BoundsCheck::pattern() {
  static const std::array<unsigned char, kGuardBytes> bytes = [] {
    std::array<unsigned char, kGuardBytes> out{};
    std::uint32_t state = 0x2545F491u;
    for (unsigned char& byte : out) {
      state = state * 1664525u + 1013904223u;  // Numerical Recipes' LCG; the high byte varies well
      byte = static_cast<unsigned char>(state >> 24);
    }
    return out;
  }();
  return bytes.data();
}

std::uint64_t BoundsCheck::guard_for(std::uint64_t size, std::uint64_t max_alloc) {
  if (size >= max_alloc) return 0;
  return std::min(kGuardBytes, max_alloc - size);
}

bool BoundsCheck::armed(Guarded& guarded, bool all_done) {
  if (!guarded.fill) return true;
  cl_int status = CL_QUEUED;
  if (!all_done &&
      clGetEventInfo(guarded.fill.get(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                     &status, nullptr) == CL_SUCCESS &&
      status > CL_COMPLETE) {
    return false;
  }
  guarded.fill.reset();
  return true;
}

std::optional<BoundsCheck::Guarded> BoundsCheck::untrack(cl_mem mem) {
  auto it = guarded_.find(mem);
  if (it == guarded_.end()) return std::nullopt;
  Guarded guarded = std::move(it->second);
  guarded_.erase(it);
  return guarded;
}

void BoundsCheck::note(const LaunchRecord& launch, std::uintptr_t stream) {
  if (launches_.size() == kHistory) {
    launches_.pop_front();
    ++dropped_;
  }
  Launch entry{launch.kernel != nullptr ? launch.kernel->name : std::string("?"),
               launch.entry_point != nullptr ? launch.entry_point : "", stream, {}};
  // cl_mem arguments are stored as their bytes, like scalars: any pointer-sized argument that
  // names a guarded buffer counts.
  for (std::size_t i = 0; i < launch.args.count(); ++i) {
    LaunchArgs::Arg arg = launch.args[i];
    if (arg.value == nullptr || arg.size != sizeof(cl_mem)) continue;
    cl_mem mem = nullptr;
    std::memcpy(&mem, arg.value, sizeof(mem));
    auto it = guarded_.find(mem);
    if (it == guarded_.end()) continue;
    it->second.touched = true;
    entry.buffers.push_back(mem);
  }
  launches_.push_back(std::move(entry));
}

void BoundsCheck::forget_launches() {
  launches_.clear();
  dropped_ = 0;
}

std::uint64_t BoundsCheck::overrun(const unsigned char* guard_bytes, std::uint64_t guard) {
  const unsigned char* expected = pattern();
  for (std::uint64_t i = guard; i > 0; --i) {
    if (guard_bytes[i - 1] != expected[i - 1]) return i;
  }
  return 0;
}

std::string BoundsCheck::describe(cl_mem mem, const Guarded& guarded, std::uint64_t overrun,
                                  const std::string& buffer_name) const {
  std::string name = buffer_name;
  if (name.empty() && namer_) name = namer_(mem);
  if (name.empty()) name = fmt::format("a buffer (cl_mem {})", static_cast<const void*>(mem));
  std::string text = fmt::format("{} of {} bytes was written past its end: ", name, guarded.size);
  if (overrun >= guarded.guard) {
    text += fmt::format(
        "the whole {}-byte guard after it was overwritten, so the writes may reach further, past "
        "what the guard protects",
        guarded.guard);
  } else {
    text += fmt::format("{} bytes past its end were written (caught by its {}-byte guard)",
                        overrun, guarded.guard);
  }
  // Suspects: the launches that took the buffer, else every launch kept.
  std::vector<const Launch*> suspects;
  for (const Launch& launch : launches_) {
    if (std::find(launch.buffers.begin(), launch.buffers.end(), mem) != launch.buffers.end()) {
      suspects.push_back(&launch);
    }
  }
  bool took_it = !suspects.empty();
  if (!took_it) {
    for (const Launch& launch : launches_) suspects.push_back(&launch);
  }
  if (suspects.empty()) {
    return text + "; no kernel was launched since the last clean check (a host write or an "
                  "earlier launch whose record was dropped)";
  }
  // Consecutive launches of the same kernel, entry point and stream are listed once, counted.
  std::vector<std::tuple<const Launch*, std::size_t>> groups;
  for (const Launch* launch : suspects) {
    if (!groups.empty()) {
      const Launch* last = std::get<0>(groups.back());
      if (last->kernel == launch->kernel && last->stream == launch->stream &&
          std::string_view(last->entry_point) == launch->entry_point) {
        ++std::get<1>(groups.back());
        continue;
      }
    }
    groups.emplace_back(launch, 1);
  }
  constexpr std::size_t kListed = 8;
  text += took_it ? "; launches since the last clean check that took this buffer, oldest first: "
                  : "; no launch kept took this buffer; every launch since the last clean check, "
                    "oldest first: ";
  for (std::size_t i = 0; i < groups.size() && i < kListed; ++i) {
    auto [launch, count] = groups[i];
    text += fmt::format("{}kernel '{}' from {} on {}{}", i == 0 ? "" : ", ", launch->kernel,
                        *launch->entry_point != '\0' ? launch->entry_point : "the driver",
                        stream_name(launch->stream),
                        count > 1 ? fmt::format(" ({} launches)", count) : std::string());
  }
  if (groups.size() > kListed) text += fmt::format(", and {} more", groups.size() - kListed);
  if (dropped_ > 0) text += fmt::format(" ({} earlier launches were not kept)", dropped_);
  return text;
}

}  // namespace aethercl
