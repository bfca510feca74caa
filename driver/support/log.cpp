// Creates the driver logger once; never registered globally, so a host application's spdlog
// configuration and ours cannot interfere.
#include "support/log.h"

#include "support/env.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <memory>

namespace aethercl {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto created = std::make_shared<spdlog::logger>("aethercl", sink);
    created->set_pattern("[aethercl %l] %v");
    spdlog::level::level_enum level = spdlog::level::warn;
    if (auto name = env::get(env::kLogLevel)) level = spdlog::level::from_str(*name);
    created->set_level(level);
    created->flush_on(spdlog::level::warn);
    return created;
  }();
  return *logger;
}

}  // namespace aethercl
