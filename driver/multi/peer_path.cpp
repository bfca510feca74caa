// AETHERCL_PEER_PATH resolution.
#include "multi/peer_path.h"

#include "support/env.h"
#include "support/error.h"
#include "support/log.h"

#include <string>

namespace aethercl::multi {

PeerPath choose_peer_path(bool shared_context, bool all_cpu) {
  std::string wanted = env::get(env::kPeerPath).value_or("auto");
  if (wanted == "engine") wanted = "auto";
  if (wanted != "auto" && wanted != "device" && wanted != "host") {
    log().warn("{}='{}' is not engine, device, host or auto; using auto", env::kPeerPath, wanted);
    wanted = "auto";
  }
  if (wanted == "device" && !shared_context) {
    fail(Status::kNotImplemented,
         "{}=device, but these devices do not share an OpenCL context (different platforms, "
         "GPUs, which get a context each unless {}=1, or {}=0), so they cannot copy from each "
         "other's buffers", env::kPeerPath, env::kSharedContext, env::kSharedContext);
  }
  if (wanted == "device") return PeerPath::kDevice;
  if (wanted == "host") return PeerPath::kHost;
  return (shared_context && all_cpu) ? PeerPath::kDevice : PeerPath::kHost;
}

EngineWish engine_wish() {
  std::string wanted = env::get(env::kPeerPath).value_or("auto");
  if (wanted == "engine") return EngineWish::kRequired;
  if (wanted == "device" || wanted == "host") return EngineWish::kOff;
  return EngineWish::kAllowed;  // auto, and a malformed value (choose_peer_path warns)
}

}  // namespace aethercl::multi
