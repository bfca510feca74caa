// Per-device GEMM state, keyed by the device's process-unique serial.
#include "gemm/device_state.h"

#include <map>
#include <mutex>

namespace aethercl::gemm {

GemmDeviceState& device_state(const Device& device) {
  static std::mutex mutex;
  static std::map<std::uint64_t, GemmDeviceState> states;  // nodes are stable: references last
  std::lock_guard<std::mutex> lock(mutex);
  return states[device.serial()];
}

}  // namespace aethercl::gemm
