// Thread-local last-error storage; never allocates on the success path.
#include "support/last_error.h"

#include <algorithm>
#include <cstring>

namespace aethercl {
namespace {

struct LastError {
  Status status = Status::kOk;
  std::string message;
  bool fixed_in_use = false;  // the message is in `fixed`, not `message`
  char fixed[1024] = {};
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
  last.fixed_in_use = false;
}

void set_last_error_fixed(Status status, std::initializer_list<std::string_view> parts) noexcept {
  LastError& last = thread_last_error();
  std::size_t length = 0;
  for (std::string_view part : parts) {
    std::size_t take = std::min(part.size(), sizeof(last.fixed) - 1 - length);
    std::memcpy(last.fixed + length, part.data(), take);
    length += take;
  }
  last.fixed[length] = '\0';
  last.status = status;
  last.fixed_in_use = true;
}

void clear_last_error() noexcept {
  LastError& last = thread_last_error();
  last.status = Status::kOk;
  last.message.clear();  // keeps capacity: no allocation, no free
  last.fixed_in_use = false;
}

Status last_error_status() noexcept { return thread_last_error().status; }

const char* last_error_message() noexcept {
  const LastError& last = thread_last_error();
  return last.fixed_in_use ? last.fixed : last.message.c_str();
}

}  // namespace aethercl
