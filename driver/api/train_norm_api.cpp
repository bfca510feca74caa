// Entry points: LayerNorm / RMSNorm and BatchNorm (version 3 training ops).
#include "api/guard.h"
#include "ops/train/batchnorm.h"
#include "ops/train/common.h"
#include "ops/train/norm.h"

#include <aethercl/driver.h>

#include <cstddef>

using namespace aethercl;
namespace train = aethercl::ops::train;

extern "C" {

AETHERCL_API int aethercl_norm_forward(int gpu_index, const aethercl_norm_desc* desc,
                                       void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::norm_forward(call, train::read_desc_from(desc, offsetof(aethercl_norm_desc, dres)));
  });
}

AETHERCL_API int aethercl_norm_backward(int gpu_index, const aethercl_norm_desc* desc,
                                        void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::norm_backward(call, train::read_desc_from(desc, offsetof(aethercl_norm_desc, dres)));
  });
}

AETHERCL_API int aethercl_batchnorm_forward(int gpu_index, const aethercl_batchnorm_desc* desc,
                                            void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::batchnorm_forward(call, train::read_desc(desc));
  });
}

AETHERCL_API int aethercl_batchnorm_backward(int gpu_index, const aethercl_batchnorm_desc* desc,
                                             void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::batchnorm_backward(call, train::read_desc(desc));
  });
}

}  // extern "C"
