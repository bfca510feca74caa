// aethercl_copy_peer between two CUDA devices through the vendor engines: the source buffer is
// copied by OpenCL into the source device's staging (memory both APIs see), cuMemcpyPeerAsync
// moves it to the target device's staging (NVLink where there is one), and OpenCL copies it into
// the target buffer on the target's current stream; in chunks of at most 256 MiB, the APIs ordered
// by host waits. The staging (per device, kept between calls, released by shutdown_driver) grows
// to the largest chunk so far.
#pragma once

#include "runtime/device.h"

#include <cstdint>

namespace aethercl::multi {

// Returns false, having done nothing, when the engines are not loaded or do not serve both
// devices (required: throws kNotImplemented instead, for AETHERCL_PEER_PATH=engine). When a CUDA
// or OpenCL call fails, that pair of devices takes the OpenCL path for the rest of the process
// (one warning) and this returns false for the caller to redo the copy there; required: throws
// the Error naming the call instead.
bool copy_peer_on_engine(Device& to, Stream& to_stream, cl_mem dst, std::uint64_t dst_offset,
                         Device& from, Stream& from_stream, cl_mem src, std::uint64_t src_offset,
                         std::uint64_t size, bool required);

}  // namespace aethercl::multi
