// Entry points: the general matrix product and the matmul precision (ABI version 3).
#include "api/guard.h"
#include "gemm/compute_mode.h"
#include "gemm/general_gemm.h"
#include "runtime/stream.h"

#include <aethercl/driver.h>

using namespace aethercl;

namespace {

// Makes `stream` this thread's current stream of the device for the duration of one call, so the
// GEMM engine's launches (which follow the current stream) go to the stream the caller named.
class CurrentStreamScope {
 public:
  CurrentStreamScope(int device_index, std::uint64_t id)
      : device_index_(device_index), saved_(current_stream_id(device_index)) {
    set_current_stream_id(device_index, id);
  }
  ~CurrentStreamScope() { set_current_stream_id(device_index_, saved_); }
  CurrentStreamScope(const CurrentStreamScope&) = delete;
  CurrentStreamScope& operator=(const CurrentStreamScope&) = delete;

 private:
  int device_index_;
  std::uint64_t saved_;
};

}  // namespace

extern "C" {

AETHERCL_API int aethercl_gemm(int gpu_index, const aethercl_gemm_desc* desc, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    Stream& target = call.use_stream(stream, "stream");  // NULL: the default stream
    CurrentStreamScope scope(call.device().index(), target.id());
    gemm::general_gemm(call, desc);
  });
}

AETHERCL_API int aethercl_set_matmul_precision(int gpu_index, int compute) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    gemm::set_matmul_precision(call, gemm::compute_mode_from_code(compute, "compute"));
  });
}

}  // extern "C"
