// A vendor library opened with dlopen and its symbols. Never closed: vendor runtimes keep threads
// and handlers that must outlive every use, and the process exits with them loaded. Not built on
// Windows, where the vendor engines are compiled out (vendor/engines.h).
#pragma once

#include <optional>
#include <string>

namespace aethercl::vendor {

class SharedLibrary {
 public:
  // Opens path (a file name searched like dlopen does, or a path). nullopt with why set (dlerror's
  // text) when it cannot be loaded; absent is true when the file simply is not there.
  static std::optional<SharedLibrary> open(const std::string& path, std::string& why,
                                           bool& absent);
  // The symbol's address or nullptr.
  void* symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

}  // namespace aethercl::vendor
