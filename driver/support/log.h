// The driver's spdlog logger: stderr, level from AETHERCL_LOG_LEVEL, warn by default.
#pragma once

#include <spdlog/spdlog.h>

#include <optional>
#include <string>

namespace aethercl {

spdlog::logger& log();
// "trace" … "off", "warning", "err"; any case, spaces ignored. nullopt for anything else.
std::optional<spdlog::level::level_enum> parse_log_level(const std::string& text);

}  // namespace aethercl
