// Launch capture: launches written as JSON plus the program binary they ran (launch_capture.h).
#include "runtime/launch_capture.h"

#include "runtime/device_info.h"
#include "runtime/program_build.h"
#include "support/env.h"
#include "support/error.h"
#include "support/hash.h"
#include "support/log.h"

#include <array>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aethercl {
namespace {

namespace fs = std::filesystem;

struct CaptureSettings {
  std::optional<fs::path> directory;  // nullopt: capture is off
  std::vector<std::string> kernels;   // name substrings; empty: every kernel
  std::uint64_t limit = 1;            // launches per kernel name
};

const CaptureSettings& settings() {
  static const CaptureSettings cached = [] {
    CaptureSettings s;
    if (auto dir = env::get(env::kCaptureDir)) s.directory = fs::path(*dir);
    s.kernels = env::list(env::kCaptureKernels);
    s.limit = env::count(env::kCaptureLimit, 1, 1u << 20).value_or(1);
    return s;
  }();
  return cached;
}

// What the capture has written so far, shared by every thread that submits launches.
struct CaptureState {
  std::mutex mutex;
  std::map<std::string, std::uint64_t> captured;  // launches written per kernel name
  std::set<std::string> binaries;                 // program files already written
  bool failure_logged = false;
};

CaptureState& state() {
  static CaptureState instance;
  return instance;
}

bool selected(const std::string& kernel) {
  const auto& names = settings().kernels;
  if (names.empty()) return true;
  for (const std::string& part : names) {
    if (kernel.find(part) != std::string::npos) return true;
  }
  return false;
}

bool is_ptx(const std::vector<unsigned char>& binary) {
  const std::string_view text(reinterpret_cast<const char*>(binary.data()), binary.size());
  return text.find(".version") != std::string_view::npos &&
         text.find(".entry") != std::string_view::npos;
}

// Whether argument `index` is a buffer according to the kernel's argument info; nullopt when
// the program was built without it.
std::optional<bool> arg_info_buffer(cl_kernel kernel, std::size_t index) {
  cl_kernel_arg_address_qualifier qualifier = 0;
  if (clGetKernelArgInfo(kernel, static_cast<cl_uint>(index), CL_KERNEL_ARG_ADDRESS_QUALIFIER,
                         sizeof(qualifier), &qualifier, nullptr) != CL_SUCCESS) {
    return std::nullopt;
  }
  return qualifier == CL_KERNEL_ARG_ADDRESS_GLOBAL || qualifier == CL_KERNEL_ARG_ADDRESS_CONSTANT;
}

std::string hex(const void* value, std::size_t size) {
  std::string out;
  const auto* bytes = static_cast<const unsigned char*>(value);
  for (std::size_t i = 0; i < size; ++i) out += fmt::format("{:02x}", bytes[i]);
  return out;
}

std::string arg_json(cl_kernel kernel, std::size_t index, const LaunchArgs::Arg& arg,
                     const std::optional<std::vector<bool>>& ptx_pointers) {
  if (arg.value == nullptr) return fmt::format("{{\"kind\": \"local\", \"bytes\": {}}}", arg.size);
  std::optional<bool> buffer;
  if (ptx_pointers && index < ptx_pointers->size()) {
    buffer = (*ptx_pointers)[index];
  } else {
    buffer = arg_info_buffer(kernel, index);
  }
  if (!buffer) {
    return fmt::format("{{\"kind\": \"unknown\", \"size\": {}, \"hex\": \"{}\"}}", arg.size,
                       hex(arg.value, arg.size));
  }
  if (*buffer && arg.size == sizeof(cl_mem)) {
    cl_mem mem = nullptr;
    std::memcpy(&mem, arg.value, sizeof(mem));
    std::size_t bytes = 0;
    if (mem != nullptr &&
        clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof(bytes), &bytes, nullptr) != CL_SUCCESS) {
      return fmt::format("{{\"kind\": \"unknown\", \"size\": {}, \"hex\": \"{}\"}}", arg.size,
                         hex(arg.value, arg.size));
    }
    return fmt::format("{{\"kind\": \"buffer\", \"bytes\": {}}}", bytes);
  }
  return fmt::format("{{\"kind\": \"scalar\", \"size\": {}, \"hex\": \"{}\"}}", arg.size,
                     hex(arg.value, arg.size));
}

// The queue's device's name; "" when OpenCL cannot say (a capture is written regardless).
std::string device_name(cl_command_queue queue) {
  cl_device_id device = nullptr;
  if (clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof(device), &device, nullptr) !=
      CL_SUCCESS) {
    return "";
  }
  try {
    return device_string(device, CL_DEVICE_NAME);
  } catch (const Error&) {
    return "";
  }
}

std::vector<unsigned char> kernel_binary(cl_kernel kernel) {
  cl_program program = nullptr;
  if (clGetKernelInfo(kernel, CL_KERNEL_PROGRAM, sizeof(program), &program, nullptr) !=
      CL_SUCCESS) {
    return {};
  }
  return program_binary(program);
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
}

void capture(cl_command_queue queue, const LaunchRecord& record, std::uint64_t sequence) {
  const fs::path& directory = *settings().directory;
  fs::create_directories(directory);
  const Kernel& kernel = *record.kernel;
  const std::vector<unsigned char> binary = kernel_binary(kernel.get());
  const bool ptx = is_ptx(binary);
  std::string binary_file = "null";
  if (!binary.empty()) {
    const std::string name =
        fmt::format("program-{}.{}", Hasher().add(binary.data(), binary.size()).hex(),
                    ptx ? "ptx" : "bin");
    binary_file = fmt::format("\"{}\"", name);
    std::lock_guard lock(state().mutex);
    if (state().binaries.insert(name).second) {
      write_file(directory / name,
                 std::string_view(reinterpret_cast<const char*>(binary.data()), binary.size()));
    }
  }
  const auto ptx_pointers =
      ptx ? ptx_pointer_params(std::string_view(reinterpret_cast<const char*>(binary.data()),
                                                binary.size()),
                               kernel.name)
          : std::optional<std::vector<bool>>();
  std::string args;
  for (std::size_t i = 0; i < record.args.count(); ++i) {
    args += fmt::format("{}\n    {}", i ? "," : "",
                        arg_json(kernel.get(), i, record.args[i], ptx_pointers));
  }
  const LaunchGeometry& g = record.geometry;
  auto dims = [&](const std::array<std::size_t, 3>& values) {
    std::string text = "[";
    for (cl_uint d = 0; d < g.dimensions; ++d) {
      text += fmt::format("{}{}", d ? ", " : "", values[d]);
    }
    return text + "]";
  };
  const std::string json = fmt::format(
      "{{\n  \"kernel\": \"{}\",\n  \"entry_point\": \"{}\",\n  \"device\": \"{}\",\n"
      "  \"binary\": {},\n  \"binary_format\": \"{}\",\n  \"global\": {},\n  \"local\": {},\n"
      "  \"args\": [{}\n  ]\n}}\n",
      json_escape(kernel.name), json_escape(record.entry_point), json_escape(device_name(queue)),
      binary_file, binary.empty() ? "none" : ptx ? "ptx" : "other", dims(g.global),
      g.runtime_picks_local ? std::string("null") : dims(g.local), args);
  write_file(directory / fmt::format("{}-{}.json", kernel.name, sequence), json);
}

}  // namespace

std::optional<std::vector<bool>> ptx_pointer_params(std::string_view text,
                                                    std::string_view kernel) {
  std::size_t at = 0;
  while ((at = text.find(".entry", at)) != std::string_view::npos) {
    at += 6;
    std::size_t name_start = text.find_first_not_of(" \t", at);
    if (name_start == std::string_view::npos) return std::nullopt;
    std::size_t name_end = text.find_first_of(" \t\r\n(", name_start);
    if (name_end == std::string_view::npos) return std::nullopt;
    if (text.substr(name_start, name_end - name_start) != kernel) continue;
    const std::size_t open = text.find('(', name_end);
    const std::size_t close = text.find(')', name_end);
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
      return std::nullopt;
    }
    std::vector<bool> pointers;
    std::string_view params = text.substr(open + 1, close - open - 1);
    std::size_t p = 0;
    while ((p = params.find(".param", p)) != std::string_view::npos) {
      const std::size_t end = params.find(',', p);
      const std::string_view one = params.substr(p, end == std::string_view::npos ? end : end - p);
      pointers.push_back(one.find(".ptr") != std::string_view::npos);
      p += 6;
    }
    return pointers;
  }
  return std::nullopt;
}

void capture_launch(cl_command_queue queue, const LaunchRecord& record) noexcept {
  // Capture is best effort: nothing may escape into the launch, not even from reporting.
  try {
    if (!settings().directory || record.kernel == nullptr) return;
    const std::string& name = record.kernel->name;
    if (!selected(name)) return;
    std::uint64_t sequence = 0;
    {
      std::lock_guard lock(state().mutex);
      std::uint64_t& count = state().captured[name];
      if (count >= settings().limit) return;
      sequence = count++;
    }
    try {
      capture(queue, record, sequence);
    } catch (const std::exception& error) {
      std::lock_guard lock(state().mutex);
      if (!state().failure_logged) {
        state().failure_logged = true;
        log().warn("{}: cannot capture a launch of {} ({}); later failures are not logged",
                   env::kCaptureDir, name, error.what());
      }
    }
  } catch (...) {
  }
}

}  // namespace aethercl
