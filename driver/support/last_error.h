// Per-thread storage of the most recent failure (status and message) for aethercl_last_error.
#pragma once

#include "support/error.h"

#include <initializer_list>
#include <string>
#include <string_view>

namespace aethercl {

void set_last_error(Status status, std::string message) noexcept;
// Sets the message by concatenating `parts` into a fixed per-thread buffer (truncated to fit):
// no allocation and no free, for a forked child whose parent's threads may have held the
// allocator's locks at fork time.
void set_last_error_fixed(Status status, std::initializer_list<std::string_view> parts) noexcept;
void clear_last_error() noexcept;
Status last_error_status() noexcept;
const char* last_error_message() noexcept;  // never NULL; "" when none

}  // namespace aethercl
