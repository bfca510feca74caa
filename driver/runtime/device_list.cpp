// Platform/device enumeration, ordering and AETHERCL_DEVICES selection.
#include "runtime/device_list.h"

#include "cl/cl_error.h"
#include "support/env.h"
#include "support/fork_state.h"
#include "support/log.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <list>
#include <mutex>

namespace aethercl {
namespace {

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

std::string trim(const std::string& text) {
  auto begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return {};
  auto end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

constexpr cl_int kPlatformNotFound = -1001;  // CL_PLATFORM_NOT_FOUND_KHR: the loader has no ICD

// Whether an enumeration call failed (as opposed to finding nothing); the failure goes to failures.
bool failed(cl_int status, const char* call, std::vector<std::string>& failures) {
  if (status == CL_SUCCESS || status == kPlatformNotFound || status == CL_DEVICE_NOT_FOUND)
    return false;
  failures.push_back(fmt::format("{} failed: {} ({})", call, cl::error_name(status), status));
  return true;
}

std::vector<DeviceInfo> enumerate_all(std::vector<std::string>& failures) {
  note_opencl_use();  // from here on, a forked child cannot use this process's OpenCL state
  std::vector<DeviceInfo> devices;
  cl_uint platform_count = 0;
  cl_int status = clGetPlatformIDs(0, nullptr, &platform_count);
  if (failed(status, "clGetPlatformIDs", failures) || status != CL_SUCCESS || platform_count == 0)
    return devices;
  std::vector<cl_platform_id> platforms(platform_count);
  if (failed(clGetPlatformIDs(platform_count, platforms.data(), nullptr), "clGetPlatformIDs",
             failures))
    return devices;
  for (cl_platform_id platform : platforms) {
    cl_uint device_count = 0;
    status = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &device_count);
    if (failed(status, "clGetDeviceIDs", failures) || status != CL_SUCCESS || device_count == 0)
      continue;
    std::vector<cl_device_id> ids(device_count);
    if (failed(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, device_count, ids.data(), nullptr),
               "clGetDeviceIDs", failures))
      continue;
    for (cl_device_id id : ids) {
      try {
        devices.push_back(query_device_info(platform, id));
      } catch (const Error& error) {
        log().warn("skipping an OpenCL device whose properties cannot be read: {}", error.what());
        failures.push_back(error.what());
      }
    }
  }
  return devices;
}

std::mutex enumeration_mutex;
std::string last_failures;  // of the last enumeration, under enumeration_mutex

}  // namespace

std::vector<DeviceInfo> order_devices(std::vector<DeviceInfo> devices) {
  std::stable_sort(devices.begin(), devices.end(), [](const DeviceInfo& a, const DeviceInfo& b) {
    return static_cast<int>(a.kind) < static_cast<int>(b.kind);
  });
  return devices;
}

std::vector<DeviceInfo> select_devices(const std::vector<DeviceInfo>& ordered,
                                       const std::string& spec,
                                       std::vector<std::string>* unmatched) {
  if (trim(spec).empty()) return ordered;
  std::vector<DeviceInfo> selected;
  std::vector<bool> taken(ordered.size(), false);
  auto take = [&](std::size_t index) {
    if (index < ordered.size() && !taken[index]) {
      taken[index] = true;
      selected.push_back(ordered[index]);
    }
  };
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string entry = trim(spec.substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) {
      if (unmatched) unmatched->push_back("''");
      continue;
    }
    std::size_t index = 0;
    auto [end, error] = std::from_chars(entry.data(), entry.data() + entry.size(), index);
    if (error == std::errc() && end == entry.data() + entry.size()) {
      if (index >= ordered.size() && unmatched) unmatched->push_back(entry);
      take(index);
      continue;
    }
    std::string needle = lowercase(entry);
    bool matched = false;
    for (std::size_t i = 0; i < ordered.size(); ++i) {
      const DeviceInfo& device = ordered[i];
      std::string haystack =
          lowercase(device.name + " " + device.vendor + " " + device.platform_name);
      if (haystack.find(needle) != std::string::npos) {
        take(i);
        matched = true;
      }
    }
    if (!matched && unmatched) unmatched->push_back(entry);
  }
  return selected;
}

const std::vector<DeviceInfo>& visible_devices() {
  // Lists handed out stay valid: an incomplete one is kept when the next enumeration replaces it.
  static std::list<std::vector<DeviceInfo>> lists;
  static std::atomic<bool> complete{false};
  if (complete.load(std::memory_order_acquire)) return lists.back();
  std::lock_guard lock(enumeration_mutex);
  if (complete.load(std::memory_order_relaxed)) return lists.back();
  std::vector<std::string> failures;
  lists.push_back([&] {
    std::vector<DeviceInfo> ordered = order_devices(enumerate_all(failures));
    std::string spec = env::get(env::kDevices).value_or("");
    std::vector<std::string> unmatched;
    std::vector<DeviceInfo> visible = select_devices(ordered, spec, &unmatched);
    if (!spec.empty() && visible.empty()) {
      log().warn("{}='{}' matches none of the devices: {}", env::kDevices, spec,
                 describe_devices(ordered));
    } else if (!unmatched.empty()) {
      env::report_malformed(env::kDevices, spec,
                            fmt::format("a list of device indices and name parts that all match "
                                        "(no match for {})", fmt::join(unmatched, ", ")),
                            fmt::format("the visible devices are: {} (of {})",
                                        describe_devices(visible), describe_devices(ordered)));
    }
    return visible;
  }());
  last_failures = fmt::format("{}", fmt::join(failures, "; "));
  complete.store(failures.empty(), std::memory_order_release);
  return lists.back();
}

const std::vector<DeviceInfo>& enumerated_devices() {
  const auto& devices = visible_devices();
  if (std::string failures = enumeration_failures(); !failures.empty()) {
    fail(Status::kDeviceError, "the OpenCL devices could not be enumerated: {}", failures);
  }
  return devices;
}

std::string enumeration_failures() {
  std::lock_guard lock(enumeration_mutex);
  return last_failures;
}

std::string describe_devices(const std::vector<DeviceInfo>& devices) {
  if (devices.empty()) return "none";
  std::string text;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (i > 0) text += "; ";
    text += fmt::format("{}: {} ({}, {})", i, devices[i].name, devices[i].platform_name,
                        kind_name(devices[i].kind));
  }
  return text;
}

}  // namespace aethercl
