// Graphs (include/aethercl/driver.h, "Graphs"): capturing a stream's work, replaying it,
// destroying it, describing it.
#pragma once

#include "runtime/device_call.h"

#include <string>

namespace aethercl::ops {

void graph_capture_begin(DeviceCall& call, void* stream);
// The graph token of the ended capture.
void* graph_capture_end(DeviceCall& call, void* stream);
// The functions below take a graph token: they find its device and make the DeviceCall themselves.
void graph_launch(void* graph, void* stream);
void graph_destroy(void* graph);
// {"device": int, "nodes": int, "kernels": int, "bytes_held": int}
std::string graph_info_json(void* graph);

}  // namespace aethercl::ops
