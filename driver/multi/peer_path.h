// Which path moves bytes between devices: AETHERCL_PEER_PATH (engine | device | host | auto)
// against whether the devices share an OpenCL context and the vendor engines serve them.
#pragma once

#include "runtime/communicator.h"

namespace aethercl::multi {

// The OpenCL path. auto (and engine, for what the engines do not take): device when the devices
// share a context and are all CPU devices (PoCL: one host memory, so buffers move for free), else
// host. On GPUs the device path copies between buffers of a shared context, which NVIDIA's OpenCL
// serves by migrating whole buffers: measured far slower than through pinned host memory
// (docs/PERFORMANCE.md), so auto takes the host path there. host: always host. device: device
// when shared, else throws kNotImplemented. A malformed value warns (naming it) and counts as
// auto.
PeerPath choose_peer_path(bool shared_context, bool all_cpu);

// Whether the vendor engines (CUDA + NCCL, vendor/engines.h) may carry the bytes: kAllowed for
// auto, kRequired for engine (refused with kNotImplemented where they cannot), kOff for device
// and host (the bit-exact OpenCL paths).
enum class EngineWish { kOff, kAllowed, kRequired };
EngineWish engine_wish();

}  // namespace aethercl::multi
