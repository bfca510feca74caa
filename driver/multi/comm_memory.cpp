// aethercl_comm_alloc: buffers a communicator's collectives can hand to its vendor engine as they
// are (engine memory where the engine serves the communicator, the pool's memory elsewhere).
#include "multi/collectives.h"

#include "multi/multi_call.h"
#include "support/log.h"
#include "vendor/engine_comm.h"
#include "vendor/shared_buffer.h"

namespace aethercl::multi {

void* comm_alloc(void* comm_token, int rank, std::size_t size) {
  MultiDeviceCall call;
  Runtime& runtime = call.runtime();
  runtime.require_any_device();
  std::shared_ptr<Communicator> comm = runtime.comms().find(comm_token, "comm");
  if (rank < 0 || rank >= comm->size()) {
    fail(Status::kInvalidArgument, "rank {} is not a rank of this communicator (0 .. {})", rank,
         comm->size() - 1);
  }
  if (size == 0) fail(Status::kInvalidArgument, "size is 0 (allocations must be at least 1 byte)");
  int index = comm->rank(rank).device_index;
  if (!runtime.is_initialized(index)) {
    fail(Status::kInternal, "communicator rank {} lost its device {}", rank, index);
  }
  Device& device = runtime.resolve(index);
  call.lock({&device});
  std::lock_guard comm_lock(comm->mutex());
  Stream& stream = device.current_stream();
  device.refuse_during_capture(stream, "aethercl_comm_alloc allocates outside the memory pool");
  PoolBlock block;
  if (vendor::EngineComm* engine = comm->engine()) {
    if (size <= vendor::import_piece_bytes()) {
      try {
        cl_mem mem = nullptr;
        block.external = engine->allocate(rank, size, &mem);
        block.mem = mem;
        block.stream = stream.id();
      } catch (const Error& error) {
        log().debug("aethercl_comm_alloc: no engine memory for {} bytes on rank {} ({}); a pool "
                    "buffer instead", size, rank, error.what());
      }
    } else {
      log().debug("aethercl_comm_alloc: {} bytes exceed one engine import ({} bytes); a pool "
                  "buffer instead", size, vendor::import_piece_bytes());
    }
  }
  if (block.mem == nullptr) block = device.allocate_buffer(stream, size);
  BufferRecord record{device.index(), block, size, {}, {}};
  try {
    return runtime.buffers().insert(std::move(record));
  } catch (...) {
    device.discard_buffer(block);
    throw;
  }
}

}  // namespace aethercl::multi
