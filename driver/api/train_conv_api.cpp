// Entry points: 2-D convolution and pooling (version 3 training ops).
#include "api/guard.h"
#include "ops/train/common.h"
#include "ops/train/conv2d.h"
#include "ops/train/pool2d.h"

#include <aethercl/driver.h>

using namespace aethercl;
namespace train = aethercl::ops::train;

extern "C" {

AETHERCL_API int aethercl_conv2d_forward(int gpu_index, const aethercl_conv2d_desc* desc,
                                         void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    train::require_current_stream(stream);
    train::conv2d_forward(call, train::read_desc(desc));
  });
}

AETHERCL_API int aethercl_conv2d_backward(int gpu_index, const aethercl_conv2d_desc* desc,
                                          void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    train::require_current_stream(stream);
    train::conv2d_backward(call, train::read_desc(desc));
  });
}

AETHERCL_API int aethercl_pool2d_forward(int gpu_index, const aethercl_pool2d_desc* desc,
                                         void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    train::require_current_stream(stream);
    train::pool2d_forward(call, train::read_desc(desc));
  });
}

AETHERCL_API int aethercl_pool2d_backward(int gpu_index, const aethercl_pool2d_desc* desc,
                                          void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    train::require_current_stream(stream);
    train::pool2d_backward(call, train::read_desc(desc));
  });
}

}  // extern "C"
