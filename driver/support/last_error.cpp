// Thread-local last-error storage; never allocates on the success path.
#include "support/last_error.h"

namespace aethercl {
namespace {

struct LastError {
  Status status = Status::kOk;
  std::string message;
};

LastError& thread_last_error() noexcept {
  thread_local LastError last;
  return last;
}

}  // namespace

void set_last_error(Status status, std::string message) noexcept {
  LastError& last = thread_last_error();
  last.status = status;
  last.message = std::move(message);
}

void clear_last_error() noexcept {
  LastError& last = thread_last_error();
  last.status = Status::kOk;
  last.message.clear();  // keeps capacity: no allocation, no free
}

Status last_error_status() noexcept { return thread_last_error().status; }

const char* last_error_message() noexcept { return thread_last_error().message.c_str(); }

}  // namespace aethercl
