// Error: the one exception type the driver throws internally; api/ turns it into a status code.
#pragma once

#include <aethercl/driver.h>

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace aethercl {

enum class Status : int {
  kOk = AETHERCL_OK,
  kInvalidArgument = AETHERCL_INVALID_ARGUMENT,
  kInvalidHandle = AETHERCL_INVALID_HANDLE,
  kOutOfRange = AETHERCL_OUT_OF_RANGE,
  kOutOfMemory = AETHERCL_OUT_OF_MEMORY,
  kNotInitialized = AETHERCL_NOT_INITIALIZED,
  kNoDevice = AETHERCL_NO_DEVICE,
  kBuildFailed = AETHERCL_BUILD_FAILED,
  kDeviceError = AETHERCL_DEVICE_ERROR,
  kNotImplemented = AETHERCL_NOT_IMPLEMENTED,
  kInternal = AETHERCL_INTERNAL,
};

const char* status_name(Status status) noexcept;

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
