// Entry points: fused attention forward and backward (version 4).
#include "api/guard.h"
#include "ops/attention.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API int aethercl_attention_forward(int gpu_index, const aethercl_attention_desc* desc,
                                            void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    ops::attention_forward(call, desc);
  });
}

AETHERCL_API int aethercl_attention_backward(int gpu_index, const aethercl_attention_desc* desc,
                                             void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    ops::attention_backward(call, desc);
  });
}

}  // extern "C"
