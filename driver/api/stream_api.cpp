// Entry points: streams and events.
#include "api/guard.h"
#include "ops/stream_ops.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API void* aethercl_stream_create(int gpu_index, unsigned int flags) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceCall call(gpu_index);
    return ops::stream_create(call, flags);
  });
}

AETHERCL_API int aethercl_stream_destroy(int gpu_index, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::stream_destroy(call, stream);
  });
}

AETHERCL_API int aethercl_stream_set_current(int gpu_index, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::stream_set_current(call, stream);
  });
}

AETHERCL_API void* aethercl_stream_current(int gpu_index) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceCall call(gpu_index);
    return ops::stream_current(call);
  });
}

AETHERCL_API int aethercl_stream_synchronize(int gpu_index, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::stream_synchronize(call, stream);
  });
}

AETHERCL_API void* aethercl_event_record(int gpu_index, void* stream) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceCall call(gpu_index);
    return ops::event_record(call, stream);
  });
}

AETHERCL_API int aethercl_stream_wait_event(int gpu_index, void* stream, void* event) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::stream_wait_event(call, stream, event);
  });
}

AETHERCL_API int aethercl_event_query(void* event, int* done) {
  return api::guarded_status(__func__, [&] {
    if (done == nullptr) fail(Status::kInvalidArgument, "done is NULL");
    bool complete = ops::event_query(event);
    *done = complete ? 1 : 0;
  });
}

AETHERCL_API int aethercl_event_synchronize(void* event) {
  return api::guarded_status(__func__, [&] { ops::event_synchronize(event); });
}

AETHERCL_API int aethercl_event_elapsed_ms(void* start, void* end, float* ms) {
  return api::guarded_status(__func__, [&] {
    if (ms == nullptr) fail(Status::kInvalidArgument, "ms is NULL");
    *ms = ops::event_elapsed_ms(start, end);
  });
}

AETHERCL_API int aethercl_event_destroy(void* event) {
  return api::guarded_status(__func__, [&] { ops::event_destroy(event); });
}

}  // extern "C"
