// Process facts behind one interface: unistd.h on POSIX, the Win32 API on Windows.
#include "support/process.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace aethercl {

long current_process_id() noexcept {
#ifdef _WIN32
  return static_cast<long>(GetCurrentProcessId());
#else
  return static_cast<long>(::getpid());
#endif
}

bool on_main_thread() noexcept {
#if defined(__linux__) && defined(SYS_gettid)
  return static_cast<long>(::syscall(SYS_gettid)) == static_cast<long>(::getpid());
#else
  return false;
#endif
}

}  // namespace aethercl
