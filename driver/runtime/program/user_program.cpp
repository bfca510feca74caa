// Building user programs from source, SPIR-V and binaries, through the on-disk binary cache.
#include "runtime/program/user_program.h"

#include "cl/cl_error.h"
#include "runtime/program/binary_envelope.h"
#include "runtime/program_build.h"
#include "support/log.h"

#ifdef _WIN32
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string_view>

namespace aethercl {
namespace {

constexpr std::uint32_t kSpirvMagic = 0x07230203;
constexpr std::size_t kSpirvHeaderBytes = 20;  // magic, version, generator, bound, schema
constexpr const char* kArgInfoOption = "-cl-kernel-arg-info";

std::string caller_options(const char* options) { return options ? std::string(options) : ""; }

// The caller's options plus -cl-kernel-arg-info (argument types for launch checks), for source
// and binary builds; a runtime keeps the information in the binaries it writes.
std::string with_arg_info(const char* options) {
  std::string full = caller_options(options);
  if (full.find(kArgInfoOption) == std::string::npos) {
    full += full.empty() ? kArgInfoOption : std::string(" ") + kArgInfoOption;
  }
  return full;
}

std::vector<std::string> kernel_names(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &size) != CL_SUCCESS ||
      size == 0) {
    return {};
  }
  std::string text(size, '\0');
  if (clGetProgramInfo(program, CL_PROGRAM_KERNEL_NAMES, size, text.data(), nullptr) !=
      CL_SUCCESS) {
    return {};
  }
  std::vector<std::string> names;
  std::istringstream parts(text.c_str());
  for (std::string name; std::getline(parts, name, ';');) {
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

std::shared_ptr<UserProgram> finish(const BuildTarget& target, ProgramOrigin origin,
                                    cl::Program program, std::string options,
                                    bool from_disk_cache) {
  auto built = std::make_shared<UserProgram>();
  built->device_index = target.device_index;
  built->origin = origin;
  built->binary = program_binary(program.get());
  built->kernel_names = kernel_names(program.get());
  built->program = std::move(program);
  built->options = std::move(options);
  built->from_disk_cache = from_disk_cache;
  return built;
}

[[noreturn]] void build_failed(const BuildTarget& target, const char* what, cl_int status,
                               const std::string& options, cl_program program) {
  fail(Status::kBuildFailed, "the {} failed to build for {} ({}; options '{}'):\n{}", what,
       target.info.name, cl::error_name(status), options, build_log(program, target.info.id));
}

// Loads the cached device binary of key, if there is one the runtime accepts.
cl::Program from_cache(const BuildTarget& target, const std::string& key,
                       const std::string& options) {
  auto binary = target.disk.load(key);
  if (!binary) return cl::Program();
  cl::Program program =
      program_from_binary(target.context, target.info, binary->data(), binary->size(), options);
  if (!program) log().info("a cached user program binary was refused by the runtime; rebuilding");
  return program;
}

using CreateWithIl = cl_program (*)(cl_context, const void*, size_t, cl_int*);

// An OpenCL 2.1 entry point looked up at run time: the ICD loader the process has may predate it.
void* opencl_symbol(const char* name) {
#ifdef _WIN32
  HMODULE loader = GetModuleHandleA("OpenCL.dll");
  return loader ? reinterpret_cast<void*>(GetProcAddress(loader, name)) : nullptr;
#else
  return dlsym(RTLD_DEFAULT, name);
#endif
}

CreateWithIl il_entry_point(const DeviceInfo& info) {
  if (!info.il_version.empty() && info.device_version.rfind("OpenCL 1.", 0) != 0 &&
      info.device_version.rfind("OpenCL 2.0", 0) != 0) {
    if (void* core = opencl_symbol("clCreateProgramWithIL")) {
      return reinterpret_cast<CreateWithIl>(core);
    }
  }
  if (info.il_program_khr) {
    return reinterpret_cast<CreateWithIl>(
        clGetExtensionFunctionAddressForPlatform(info.platform, "clCreateProgramWithILKHR"));
  }
  return nullptr;
}

}  // namespace

bool device_takes_spirv(const DeviceInfo& info, std::string* missing) {
  bool names_spirv = info.il_version.find("SPIR-V") != std::string::npos;
  if (names_spirv && il_entry_point(info) != nullptr) return true;
  if (missing) {
    *missing = info.il_version.empty()
                   ? fmt::format("{} ({}) accepts no intermediate language: its "
                                 "CL_DEVICE_IL_VERSION is empty and it has no cl_khr_il_program",
                                 info.name, info.device_version)
                   : fmt::format("{} ({}) reports IL '{}' but no usable clCreateProgramWithIL",
                                 info.name, info.device_version, info.il_version);
  }
  return false;
}

std::shared_ptr<UserProgram> build_from_source(const BuildTarget& target, const char* source,
                                               const char* options) {
  if (source == nullptr) fail(Status::kInvalidArgument, "source is NULL");
  std::string_view text(source);
  if (text.empty()) fail(Status::kInvalidArgument, "source is empty");
  std::string full_options = with_arg_info(options);
  std::string key = program_cache_key(target.info, "source", text, full_options);
  if (cl::Program cached = from_cache(target, key, full_options)) {
    return finish(target, ProgramOrigin::kSource, std::move(cached), full_options, true);
  }
  const char* data = text.data();
  size_t length = text.size();
  cl_int status = CL_SUCCESS;
  cl::Program program(clCreateProgramWithSource(target.context, 1, &data, &length, &status));
  cl::check(status, "clCreateProgramWithSource");
  status = clBuildProgram(program.get(), 1, &target.info.id, full_options.c_str(), nullptr, nullptr);
  if (status == CL_INVALID_BUILD_OPTIONS) {
    fail(Status::kBuildFailed, "the compiler of {} refused the options '{}' ({})",
         target.info.name, full_options, cl::error_name(status));
  }
  if (status != CL_SUCCESS) build_failed(target, "program", status, full_options, program.get());
  auto built = finish(target, ProgramOrigin::kSource, std::move(program), full_options, false);
  target.disk.store(key, built->binary);
  return built;
}

std::shared_ptr<UserProgram> build_from_il(const BuildTarget& target, const void* il,
                                           std::size_t size, const char* options) {
  if (il == nullptr) fail(Status::kInvalidArgument, "il is NULL");
  if (size < kSpirvHeaderBytes || size % 4 != 0) {
    fail(Status::kInvalidArgument,
         "size {} is not a SPIR-V module size (a multiple of 4 bytes, at least {})", size,
         kSpirvHeaderBytes);
  }
  std::uint32_t magic = 0;
  std::memcpy(&magic, il, sizeof(magic));
  if (magic != kSpirvMagic && magic != __builtin_bswap32(kSpirvMagic)) {
    fail(Status::kInvalidArgument, "il is not SPIR-V (first word 0x{:08x}, expected 0x{:08x})",
         magic, kSpirvMagic);
  }
  std::string missing;
  if (!device_takes_spirv(target.info, &missing)) fail(Status::kNotImplemented, "{}", missing);
  std::string full_options = caller_options(options);
  std::string_view bytes(static_cast<const char*>(il), size);
  std::string key = program_cache_key(target.info, "il", bytes, full_options);
  if (cl::Program cached = from_cache(target, key, full_options)) {
    return finish(target, ProgramOrigin::kIl, std::move(cached), full_options, true);
  }
  cl_int status = CL_SUCCESS;
  cl::Program program(il_entry_point(target.info)(target.context, il, size, &status));
  if (status != CL_SUCCESS) {
    fail(Status::kBuildFailed, "{} refused the SPIR-V module: clCreateProgramWithIL {} ({})",
         target.info.name, cl::error_name(status), status);
  }
  status = clBuildProgram(program.get(), 1, &target.info.id, full_options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    build_failed(target, "SPIR-V program", status, full_options, program.get());
  }
  auto built = finish(target, ProgramOrigin::kIl, std::move(program), full_options, false);
  target.disk.store(key, built->binary);
  return built;
}

std::shared_ptr<UserProgram> build_from_binary(const BuildTarget& target, const void* binary,
                                               std::size_t size, const char* options) {
  if (binary == nullptr) fail(Status::kInvalidArgument, "binary is NULL");
  if (size == 0) fail(Status::kInvalidArgument, "size is 0");
  std::string full_options = with_arg_info(options);
  std::vector<unsigned char> unwrapped;
  const auto* bytes = static_cast<const unsigned char*>(binary);
  if (is_enveloped(binary, size)) {  // from aethercl_program_binary: checked before OpenCL sees it
    unwrapped = unwrap_binary(target.info, binary, size);
    bytes = unwrapped.data();
    size = unwrapped.size();
  }
  std::string reason;
  cl::Program program =
      program_from_binary(target.context, target.info, bytes, size, full_options, &reason);
  if (!program) {
    fail(Status::kBuildFailed, "{} refused the binary ({} bytes): {}", target.info.name, size,
         reason);
  }
  return finish(target, ProgramOrigin::kBinary, std::move(program), full_options, false);
}

}  // namespace aethercl
