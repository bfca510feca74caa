// Which path moves bytes between devices: AETHERCL_PEER_PATH (device | host | auto) against
// whether the devices share an OpenCL context.
#pragma once

#include "runtime/communicator.h"

namespace aethercl::multi {

// auto: device when shared, else host. host: always host. device: device when shared, else throws
// kNotImplemented. A malformed value warns (naming it) and counts as auto.
PeerPath choose_peer_path(bool shared_context);

}  // namespace aethercl::multi
