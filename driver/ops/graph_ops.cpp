// Graph entry points' logic over the runtime's graph tokens and Device's capture and replay.
#include "ops/graph_ops.h"

#include "runtime/graph.h"

#include <shared_mutex>

namespace aethercl::ops {
namespace {

// The device a graph token was captured on (validated: NULL, foreign, stale tokens are refused).
int device_of_graph(void* graph) {
  Runtime& runtime = Runtime::instance();
  std::shared_lock lock(runtime.lifecycle_mutex());
  runtime.require_any_device();
  return runtime.graphs().get(graph, "graph")->device_index();
}

// The stream a launch names, which must be one of the graph's device.
Stream& launch_stream(DeviceCall& call, void* graph, void* stream) {
  if (stream == nullptr) return call.device().default_stream();
  auto entry = call.runtime().streams().get(stream, "stream");
  Stream* target = entry->device_index == call.device().index()
                       ? call.device().find_stream(entry->id)
                       : nullptr;
  if (target == nullptr) {
    fail(Status::kInvalidHandle,
         "stream ({}) belongs to device {}, but graph ({}) was captured on device {} and runs "
         "only there",
         stream, entry->device_index, graph, call.device().index());
  }
  return *target;
}

}  // namespace

void graph_capture_begin(DeviceCall& call, void* stream) {
  Stream& target = call.resolve_stream(stream, "stream");
  call.device().begin_capture(target, std::make_shared<Graph>(call.device().index(), target.id()));
}

void* graph_capture_end(DeviceCall& call, void* stream) {
  Stream& target = call.resolve_stream(stream, "stream");
  std::shared_ptr<Graph> graph = call.device().end_capture(target);
  try {
    return call.runtime().graphs().insert(graph);
  } catch (...) {
    call.device().destroy_graph(*graph);
    throw;
  }
}

void graph_launch(void* graph, void* stream) {
  DeviceCall call(device_of_graph(graph));
  auto target = call.runtime().graphs().get(graph, "graph");  // destroyed meanwhile: refused
  call.device().launch_graph(*target, launch_stream(call, graph, stream));
}

void graph_destroy(void* graph) {
  DeviceCall call(device_of_graph(graph));
  auto target = call.runtime().graphs().remove(graph, "graph");
  call.device().destroy_graph(*target);
}

std::string graph_info_json(void* graph) {
  DeviceCall call(device_of_graph(graph));
  auto target = call.runtime().graphs().get(graph, "graph");
  return fmt::format("{{\"device\": {}, \"nodes\": {}, \"kernels\": {}, \"bytes_held\": {}}}",
                     target->device_index(), target->nodes(), target->kernels(),
                     call.device().graph_bytes_held(*target));
}

}  // namespace aethercl::ops
