// Entry points: unary and broadcasting binary ops, axis reductions, gather and scatter-add
// (version 3 training ops).
#include "api/guard.h"
#include "ops/train/binary.h"
#include "ops/train/common.h"
#include "ops/train/index_ops.h"
#include "ops/train/reduce_axis.h"
#include "ops/train/unary.h"

#include <aethercl/driver.h>

using namespace aethercl;
namespace train = aethercl::ops::train;

extern "C" {

AETHERCL_API int aethercl_unary(int gpu_index, int op, void* x, void* y, size_t count,
                                float alpha, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::unary(call, op, x, y, count, alpha);
  });
}

AETHERCL_API int aethercl_unary_backward(int gpu_index, int op, void* x, void* dy, void* dx,
                                         size_t count, float alpha, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::unary_backward(call, op, x, dy, dx, count, alpha);
  });
}

AETHERCL_API int aethercl_binary(int gpu_index, int op, const aethercl_broadcast_desc* desc,
                                 void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::binary(call, op, train::read_desc(desc));
  });
}

AETHERCL_API int aethercl_binary_backward(int gpu_index, int op,
                                          const aethercl_broadcast_desc* desc, void* dc,
                                          void* da, void* db, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::binary_backward(call, op, train::read_desc(desc), dc, da, db);
  });
}

AETHERCL_API int aethercl_reduce(int gpu_index, int op, void* x, void* y, int ndim,
                                 const int* shape, int axis, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::reduce_axis(call, op, x, y, ndim, shape, axis);
  });
}

AETHERCL_API int aethercl_reduce_backward(int gpu_index, int op, void* x, void* dy, void* dx,
                                          int ndim, const int* shape, int axis, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::reduce_axis_backward(call, op, x, dy, dx, ndim, shape, axis);
  });
}

AETHERCL_API int aethercl_gather(int gpu_index, const aethercl_index_desc* desc, void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::gather(call, train::read_desc(desc));
  });
}

AETHERCL_API int aethercl_scatter_add(int gpu_index, const aethercl_index_desc* desc,
                                      void* stream) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    call.use_stream(stream, "stream");
    train::scatter_add(call, train::read_desc(desc));
  });
}

}  // extern "C"
