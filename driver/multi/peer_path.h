// Which path moves bytes between devices: AETHERCL_PEER_PATH (device | host | auto) against
// whether the devices share an OpenCL context.
#pragma once

#include "runtime/communicator.h"

namespace aethercl::multi {

// auto: device when the devices share a context and are all CPU devices (PoCL: one host memory,
// so buffers move for free), else host. On GPUs the device path copies between buffers of a
// shared context, which NVIDIA's OpenCL serves by migrating whole buffers: measured far slower
// than through pinned host memory (docs/PERFORMANCE.md), so auto takes the host path there.
// host: always host. device: device when shared, else throws kNotImplemented. A malformed value
// warns (naming it) and counts as auto.
PeerPath choose_peer_path(bool shared_context, bool all_cpu);

}  // namespace aethercl::multi
