// aethercl_launch: a user kernel checked against its parameters and the device, then enqueued.
#pragma once

#include "runtime/device_call.h"

#include <aethercl/driver.h>

namespace aethercl::ops {

void launch_user_kernel(DeviceCall& call, void* kernel, void* stream, int work_dim,
                        const size_t* global_size, const size_t* local_size, int num_args,
                        const aethercl_arg* args);

}  // namespace aethercl::ops
