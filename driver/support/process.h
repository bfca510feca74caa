// Portable forms of the few operating-system facts the driver needs (POSIX and Windows).
#pragma once

namespace aethercl {

// The calling process's id (getpid / GetCurrentProcessId), e.g. for unique temporary names.
long current_process_id() noexcept;

// Whether the caller is the process's initial thread (the one whose exit() ends the process).
// Linux only; false elsewhere.
bool on_main_thread() noexcept;

}  // namespace aethercl
