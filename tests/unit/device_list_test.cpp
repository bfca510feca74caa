// Device registry: stable ordering and AETHERCL_DEVICES selection.
#include "runtime/device_list.h"

#include <doctest/doctest.h>

using namespace aethercl;

namespace {

DeviceInfo fake(const char* name, DeviceKind kind, const char* platform = "Plat") {
  DeviceInfo info;
  info.name = name;
  info.kind = kind;
  info.platform_name = platform;
  info.vendor = "Vendor";
  return info;
}

std::vector<std::string> names(const std::vector<DeviceInfo>& devices) {
  std::vector<std::string> out;
  for (const auto& device : devices) out.push_back(device.name);
  return out;
}

}  // namespace

TEST_CASE("devices are ordered GPUs, accelerators, CPUs, keeping enumeration order") {
  auto ordered = order_devices({fake("cpu0", DeviceKind::kCpu), fake("gpu0", DeviceKind::kGpu),
                                fake("acc0", DeviceKind::kAccelerator),
                                fake("gpu1", DeviceKind::kGpu), fake("cpu1", DeviceKind::kCpu)});
  CHECK(names(ordered) == std::vector<std::string>{"gpu0", "gpu1", "acc0", "cpu0", "cpu1"});
}

TEST_CASE("AETHERCL_DEVICES selects by index and by case-insensitive substring, in order") {
  auto ordered = order_devices({fake("NVIDIA H100", DeviceKind::kGpu, "NVIDIA CUDA"),
                                fake("pthread-skylake", DeviceKind::kCpu, "Portable Computing")});
  CHECK(names(select_devices(ordered, "")) == names(ordered));
  CHECK(names(select_devices(ordered, "1")) == std::vector<std::string>{"pthread-skylake"});
  CHECK(names(select_devices(ordered, "portable")) == std::vector<std::string>{"pthread-skylake"});
  CHECK(names(select_devices(ordered, "1, 0")) ==
        std::vector<std::string>{"pthread-skylake", "NVIDIA H100"});
  CHECK(names(select_devices(ordered, "h100,0")) == std::vector<std::string>{"NVIDIA H100"});
  CHECK(select_devices(ordered, "7").empty());
  CHECK(select_devices(ordered, "no-such-device").empty());
}

TEST_CASE("the visible device list is non-empty and described with indices") {
  const auto& devices = visible_devices();
  REQUIRE(!devices.empty());
  CHECK(devices.front().compute_units > 0);
  CHECK(devices.front().max_work_group_size > 0);
  CHECK(describe_devices(devices).rfind("0: ", 0) == 0);
  CHECK(describe_devices({}) == "none");
}

TEST_CASE("AETHERCL_DEVICES entries that select nothing are reported, not dropped silently") {
  auto ordered = order_devices({fake("NVIDIA H100", DeviceKind::kGpu, "NVIDIA CUDA"),
                                fake("pthread-skylake", DeviceKind::kCpu, "Portable Computing")});
  std::vector<std::string> unmatched;
  CHECK(names(select_devices(ordered, "nvdia, 1,,7", &unmatched)) ==
        std::vector<std::string>{"pthread-skylake"});
  CHECK(unmatched == std::vector<std::string>{"nvdia", "''", "7"});
  unmatched.clear();
  select_devices(ordered, "h100, skylake", &unmatched);
  CHECK(unmatched.empty());
}
