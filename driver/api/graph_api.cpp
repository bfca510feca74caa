// Entry points: graphs (capture a stream's work once, replay it with one call).
#include "api/guard.h"
#include "ops/graph_ops.h"
#include "ops/introspection.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int aethercl_graph_capture_begin(int gpu_index, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::graph_capture_begin(call, stream);
  });
}

AETHERCL_API void* aethercl_graph_capture_end(int gpu_index, void* stream) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceCall call(gpu_index);
    return ops::graph_capture_end(call, stream);
  });
}

AETHERCL_API int aethercl_graph_launch(void* graph, void* stream) {
  return api::guarded_status(__func__, [&] { ops::graph_launch(graph, stream); });
}

AETHERCL_API int aethercl_graph_destroy(void* graph) {
  return api::guarded_status(__func__, [&] { ops::graph_destroy(graph); });
}

AETHERCL_API size_t aethercl_graph_info(void* graph, char* out, size_t capacity) {
  return api::guarded(__func__, size_t{0}, [&] {
    return ops::copy_out(ops::graph_info_json(graph), out, capacity);
  });
}

}  // extern "C"
