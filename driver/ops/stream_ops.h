// Streams and events (the contract's "Streams and events" functions): creation and destruction,
// the thread's current stream, waits between streams (across devices too) and host waits,
// elapsed time between events of timing streams.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

// flags: 0 or AETHERCL_STREAM_TIMING; anything else is refused.
void* stream_create(DeviceCall& call, unsigned int flags);
void stream_destroy(DeviceCall& call, void* stream);
void stream_set_current(DeviceCall& call, void* stream);
void* stream_current(DeviceCall& call);
// Waits on the host for one stream, without holding the device meanwhile.
void stream_synchronize(DeviceCall& call, void* stream);

void* event_record(DeviceCall& call, void* stream);
void stream_wait_event(DeviceCall& call, void* stream, void* event);
// The functions below take no device: they hold the runtime's lifecycle lock themselves.
bool event_query(void* event);
void event_synchronize(void* event);
float event_elapsed_ms(void* start, void* end);
void event_destroy(void* event);

}  // namespace aethercl::ops
