// The exported function running on this thread, set by the API guard, so that launches, transfers
// and trace records can name the entry point that caused them.
#pragma once

namespace aethercl {

void set_current_entry_point(const char* name) noexcept;
// "" outside an entry point; the pointer is a string literal (__func__), valid forever.
const char* current_entry_point() noexcept;

}  // namespace aethercl
