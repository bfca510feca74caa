// Creates the driver logger once; never registered globally, so a host application's spdlog
// configuration and ours cannot interfere.
#include "support/log.h"

#include "support/env.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <cctype>
#include <memory>

namespace aethercl {

std::optional<spdlog::level::level_enum> parse_log_level(const std::string& text) {
  std::string name;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (name == "warning") return spdlog::level::warn;
  if (name == "err") return spdlog::level::err;
  for (auto level : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
                     spdlog::level::warn, spdlog::level::err, spdlog::level::critical,
                     spdlog::level::off}) {
    if (name == spdlog::level::to_string_view(level)) return level;
  }
  return std::nullopt;
}

spdlog::logger& log() {
  // Never destroyed: exit hooks (the AETHERCL_TRACE writer) and other libraries' static
  // destructors may still log after this function's statics would have been torn down.
  static spdlog::logger* logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto* created = new spdlog::logger("aethercl", sink);
    created->set_pattern("[aethercl %l] %v");
    created->set_level(spdlog::level::warn);
    created->flush_on(spdlog::level::warn);
    if (auto name = env::get(env::kLogLevel)) {
      if (auto level = parse_log_level(*name)) {
        created->set_level(*level);
      } else if (env::claim_report(env::kLogLevel)) {  // the logger cannot call itself here
        created->warn("{}='{}' is not a log level (trace, debug, info, warn, error, critical, "
                      "off; any case); using warn", env::kLogLevel, *name);
      }
    }
    return created;
  }();
  return *logger;
}

}  // namespace aethercl
