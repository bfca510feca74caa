// Per-thread storage of the most recent failure (status and message) for aethercl_last_error.
#pragma once

#include "support/error.h"

#include <string>

namespace aethercl {

void set_last_error(Status status, std::string message) noexcept;
void clear_last_error() noexcept;
Status last_error_status() noexcept;
const char* last_error_message() noexcept;  // never NULL; "" when none

}  // namespace aethercl
