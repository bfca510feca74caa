// The fork handler is installed when the library is loaded (glibc removes it again when the
// library is unloaded), so no fork can slip between the first OpenCL use and its installation.
#include "support/fork_state.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace aethercl {
namespace {

std::atomic<bool> opencl_used{false};
std::atomic<bool> forked{false};
std::atomic<long> user_pid{0};

// Runs in the child right after fork(); only async-signal-safe work here.
void mark_child() {
  if (opencl_used.load(std::memory_order_relaxed)) forked.store(true, std::memory_order_relaxed);
}

const bool handler_installed = pthread_atfork(nullptr, nullptr, mark_child) == 0;

}  // namespace

void note_opencl_use() noexcept {
  if (opencl_used.load(std::memory_order_acquire)) return;
  long expected = 0;
  user_pid.compare_exchange_strong(expected, static_cast<long>(::getpid()));
  opencl_used.store(true, std::memory_order_release);
}

bool forked_after_opencl_use() noexcept {
  if (handler_installed) return forked.load(std::memory_order_relaxed);
  // Without the handler (pthread_atfork failed): compare process ids, one system call each time.
  return opencl_used.load(std::memory_order_acquire) && ::getpid() != opencl_user_pid();
}

long opencl_user_pid() noexcept { return user_pid.load(std::memory_order_relaxed); }

}  // namespace aethercl
