// Per-device state of the GEMM engine that lives across calls: the matmul precision set by the
// client and what the tensor-core probe found.
#pragma once

#include "runtime/device.h"

#include <map>
#include <optional>
#include <string>

namespace aethercl::gemm {

// What the first reduced-precision product found out about a device's tensor cores.
struct TensorCoreSupport {
  bool probed = false;
  bool available = false;
  int sm = 0;              // compute capability as major * 10 + minor (NVIDIA), else 0
  std::string reason;      // why they are unavailable (logged once)
};

struct GemmDeviceState {
  std::optional<int> matmul_precision;  // AETHERCL_COMPUTE_*; unset: the environment decides
  TensorCoreSupport tensor_cores;
  std::map<int, bool> kind_checked;  // MmaKind -> whether its probe product came out exact
  std::map<std::string, bool> variant_refused;  // build options -> did not build or launch
};

// The state of device (created empty on first use; never shared with a later device at the
// same index). The caller holds the device's mutex, which guards the returned state.
GemmDeviceState& device_state(const Device& device);

}  // namespace aethercl::gemm
