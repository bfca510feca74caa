// Platform/device enumeration, ordering and AETHERCL_DEVICES selection.
#include "runtime/device_list.h"

#include "cl/cl_error.h"
#include "support/env.h"
#include "support/fork_state.h"
#include "support/log.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>

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

std::vector<DeviceInfo> enumerate_all() {
  note_opencl_use();  // from here on, a forked child cannot use this process's OpenCL state
  std::vector<DeviceInfo> devices;
  cl_uint platform_count = 0;
  if (clGetPlatformIDs(0, nullptr, &platform_count) != CL_SUCCESS || platform_count == 0) {
    return devices;
  }
  std::vector<cl_platform_id> platforms(platform_count);
  if (clGetPlatformIDs(platform_count, platforms.data(), nullptr) != CL_SUCCESS) return devices;
  for (cl_platform_id platform : platforms) {
    cl_uint device_count = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &device_count) != CL_SUCCESS ||
        device_count == 0) {
      continue;
    }
    std::vector<cl_device_id> ids(device_count);
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, device_count, ids.data(), nullptr) !=
        CL_SUCCESS) {
      continue;
    }
    for (cl_device_id id : ids) {
      try {
        devices.push_back(query_device_info(platform, id));
      } catch (const Error& error) {
        log().warn("skipping an OpenCL device whose properties cannot be read: {}", error.what());
      }
    }
  }
  return devices;
}

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
  static const std::vector<DeviceInfo> devices = [] {
    std::vector<DeviceInfo> ordered = order_devices(enumerate_all());
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
  }();
  return devices;
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
