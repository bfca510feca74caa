// Process facts behind one interface: unistd.h on POSIX, the Win32 API on Windows.
#include "support/process.h"

#ifdef _WIN32
#include <windows.h>
#else
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

}  // namespace aethercl
