// Entry points: user programs and kernels (create, binary, describe, destroy) and aethercl_launch.
#include "api/guard.h"
#include "ops/introspection.h"
#include "ops/user_launch.h"
#include "ops/user_programs.h"

#include <aethercl/driver.h>

using namespace aethercl;

extern "C" {

AETHERCL_API void* aethercl_program_create(int gpu_index, const char* source,
                                           const char* options) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceScope scope(gpu_index);
    return ops::create_program(scope, source, options);
  });
}

AETHERCL_API void* aethercl_program_create_il(int gpu_index, const void* il, size_t size,
                                              const char* options) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceScope scope(gpu_index);
    return ops::create_program_il(scope, il, size, options);
  });
}

AETHERCL_API void* aethercl_program_create_binary(int gpu_index, const void* binary, size_t size,
                                                  const char* options) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    DeviceScope scope(gpu_index);
    return ops::create_program_binary(scope, binary, size, options);
  });
}

AETHERCL_API size_t aethercl_program_binary(void* program, void* out, size_t capacity) {
  return api::guarded(__func__, size_t{0}, [&] {
    TokenCall call;
    return ops::program_binary(call, program, out, capacity);
  });
}

AETHERCL_API int aethercl_program_destroy(void* program) {
  return api::guarded_status(__func__, [&] {
    TokenCall call;
    ops::destroy_program(call, program);
  });
}

AETHERCL_API void* aethercl_kernel_create(void* program, const char* name) {
  return api::guarded(__func__, static_cast<void*>(nullptr), [&] {
    TokenCall call;
    return ops::create_kernel(call, program, name);
  });
}

AETHERCL_API size_t aethercl_kernel_info(void* kernel, char* buffer, size_t capacity) {
  return api::guarded(__func__, size_t{0}, [&] {
    TokenCall call;
    return ops::copy_out(ops::kernel_info(call, kernel), buffer, capacity);
  });
}

AETHERCL_API int aethercl_kernel_destroy(void* kernel) {
  return api::guarded_status(__func__, [&] {
    TokenCall call;
    ops::destroy_kernel(call, kernel);
  });
}

AETHERCL_API int aethercl_launch(int gpu_index, void* kernel, void* stream, int work_dim,
                                 const size_t* global_size, const size_t* local_size,
                                 int num_args, const aethercl_arg* args) {
  return api::guarded_status(__func__, [&] {
    DeviceCall call(gpu_index);
    ops::launch_user_kernel(call, kernel, stream, work_dim, global_size, local_size, num_args,
                            args);
  });
}

}  // extern "C"
