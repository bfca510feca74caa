// Error: the one exception type the driver throws internally; api/ turns it into a status code.
#pragma once

#include <aethercl/driver.h>

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace aethercl {

// The stable status codes, from the one table abi/status.def (which also gives the Python
// constants); every value is checked at compile time against the header's enum aethercl_status.
enum class Status : int {
#define AETHERCL_STATUS(value, name, enumerator, description) enumerator = (value),
#include "status.def"
#undef AETHERCL_STATUS
};

#define AETHERCL_STATUS(value, name, enumerator, description) \
  static_assert((value) == (name), #name " in abi/status.def differs from <aethercl/driver.h>");
#include "status.def"
#undef AETHERCL_STATUS

// The name of a status code ("AETHERCL_OUT_OF_RANGE"); "AETHERCL_UNKNOWN_STATUS" for any int the
// table lacks.
const char* status_name(int code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Status status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// Throws Error(status, formatted message). The entry-point guard prefixes the function name.
template <typename... Args>
[[noreturn]] void fail(Status status, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(status, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace aethercl
