// The driver's spdlog logger: stderr, level from AETHERCL_LOG_LEVEL, warn by default.
#pragma once

#include <spdlog/spdlog.h>

namespace aethercl {

spdlog::logger& log();

}  // namespace aethercl
