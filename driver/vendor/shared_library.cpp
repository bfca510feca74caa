// dlopen / dlsym for the vendor engines.
#include "vendor/shared_library.h"

#if !defined(_WIN32)
#include <dlfcn.h>
#include <sys/stat.h>
#endif

namespace aethercl::vendor {

#if !defined(_WIN32)
std::optional<SharedLibrary> SharedLibrary::open(const std::string& path, std::string& why,
                                                 bool& absent) {
  // RTLD_LOCAL: the vendor's symbols never interpose on anything else in the process.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) return SharedLibrary(handle, path);
  const char* error = dlerror();
  why = error != nullptr ? error : "dlopen failed";
  if (path.find('/') != std::string::npos) {
    struct stat info{};
    absent = stat(path.c_str(), &info) != 0;
  } else {
    // A bare name: dlopen searched the library path; "No such file" there means not installed.
    absent = why.find("No such file") != std::string::npos ||
             why.find("cannot open shared object") != std::string::npos;
  }
  return std::nullopt;
}

void* SharedLibrary::symbol(const char* name) const {
  return dlsym(handle_, name);
}
#else
// Windows: the vendor engines are compiled out (vendor/engines.h); nothing is ever opened.
std::optional<SharedLibrary> SharedLibrary::open(const std::string&, std::string& why,
                                                 bool& absent) {
  why = "vendor engines are not built on Windows";
  absent = true;
  return std::nullopt;
}

void* SharedLibrary::symbol(const char*) const { return nullptr; }
#endif

}  // namespace aethercl::vendor
