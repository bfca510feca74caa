// Stateless launches: every argument is validated (kind, token, size) and the geometry checked
// against the device and the kernel before anything is set on the shared cl_kernel.
#include "ops/user_launch.h"

#include "runtime/launch.h"
#include "support/checked.h"

#include <fmt/ranges.h>


namespace aethercl::ops {
namespace {

std::string describe_parameter(const UserKernel& kernel, std::size_t index) {
  const KernelParameter& parameter = kernel.parameters[index];
  std::string text = fmt::format("parameter {}", index);
  if (!parameter.name.empty()) text += fmt::format(" ('{}')", parameter.name);
  return text + fmt::format(" of kernel '{}'", kernel.kernel.name);
}

const char* kind_word(int kind) {
  switch (kind) {
    case AETHERCL_ARG_BUFFER: return "a buffer";
    case AETHERCL_ARG_SCALAR: return "a scalar";
    default: return "local memory";
  }
}

ArgKind kind_of(int kind) {
  switch (kind) {
    case AETHERCL_ARG_BUFFER: return ArgKind::kBuffer;
    case AETHERCL_ARG_SCALAR: return ArgKind::kScalar;
    default: return ArgKind::kLocal;
  }
}

// Checks every argument against the kernel and the device and returns their values in order.
LaunchArgs prepare_args(DeviceCall& call, const UserKernel& kernel, int num_args,
                        const aethercl_arg* args) {
  std::size_t expected = kernel.parameters.size();
  if (num_args < 0) fail(Status::kInvalidArgument, "num_args = {} is negative", num_args);
  if (static_cast<std::size_t>(num_args) != expected) {
    fail(Status::kInvalidArgument, "num_args = {}, but kernel '{}' takes {} arguments", num_args,
         kernel.kernel.name, expected);
  }
  if (num_args > 0 && args == nullptr) fail(Status::kInvalidArgument, "args is NULL");
  const DeviceInfo& info = call.device().info();
  LaunchArgs prepared;
  std::uint64_t local_bytes = kernel.local_mem_bytes;
  std::uint64_t scalar_bytes = 0;
  for (std::size_t i = 0; i < expected; ++i) {
    const aethercl_arg& arg = args[i];
    const KernelParameter& parameter = kernel.parameters[i];
    if (arg.kind < AETHERCL_ARG_BUFFER || arg.kind > AETHERCL_ARG_LOCAL) {
      fail(Status::kInvalidArgument,
           "args[{}].kind = {} is not AETHERCL_ARG_BUFFER (0), AETHERCL_ARG_SCALAR (1) or "
           "AETHERCL_ARG_LOCAL (2)",
           i, arg.kind);
    }
    if (kernel.arg_info) {
      if (parameter.kind == ArgKind::kUnknown) {
        fail(Status::kNotImplemented,
             "{} is a '{}', which aethercl_launch cannot pass (buffers, scalars and local memory "
             "only)",
             describe_parameter(kernel, i), parameter.type);
      }
      if (parameter.kind != kind_of(arg.kind)) {
        fail(Status::kInvalidArgument, "args[{}] is {}, but {} is {} ('{}')", i,
             kind_word(arg.kind), describe_parameter(kernel, i), arg_kind_name(parameter.kind),
             parameter.type);
      }
    }
    switch (arg.kind) {
      case AETHERCL_ARG_BUFFER: {
        std::string name = fmt::format("args[{}].value", i);
        prepared.add(call.buffer(arg.value, name.c_str(), 0).mem);
        break;
      }
      case AETHERCL_ARG_SCALAR: {
        if (arg.value == nullptr) fail(Status::kInvalidArgument, "args[{}].value is NULL", i);
        if (arg.size == 0) fail(Status::kInvalidArgument, "args[{}].size is 0", i);
        if (parameter.size && arg.size != *parameter.size) {
          fail(Status::kInvalidArgument, "args[{}].size = {}, but {} is a {} of {} bytes", i,
               arg.size, describe_parameter(kernel, i), parameter.type, *parameter.size);
        }
        scalar_bytes += arg.size;
        if (arg.size > info.max_parameter_size || scalar_bytes > info.max_parameter_size) {
          fail(Status::kInvalidArgument,
               "args[{}].size = {} takes the scalar arguments past the device's {} bytes of "
               "kernel parameters",
               i, arg.size, info.max_parameter_size);
        }
        prepared.add_bytes(arg.value, arg.size);  // copied now: the caller may reuse it
        break;
      }
      default: {
        if (arg.size == 0) {
          fail(Status::kInvalidArgument, "args[{}].size is 0 (local memory needs at least 1 byte)",
               i);
        }
        auto total = checked_add(local_bytes, arg.size);
        if (!total || *total > info.local_mem_bytes) {
          fail(Status::kOutOfRange,
               "args[{}].size = {} bytes of local memory: with the kernel's own {} and the "
               "earlier local arguments that exceeds the device's {} bytes",
               i, arg.size, kernel.local_mem_bytes, info.local_mem_bytes);
        }
        local_bytes = *total;
        prepared.add_local(arg.size);
        break;
      }
    }
  }
  return prepared;
}

// Checks the NDRange; returns false when it has no work (a 0 component).
bool check_geometry(const DeviceInfo& info, const UserKernel& kernel, int work_dim,
                    const size_t* global, const size_t* local) {
  std::size_t max_dims = info.max_work_item_sizes.empty() ? 3 : info.max_work_item_sizes.size();
  if (work_dim < 1 || static_cast<std::size_t>(work_dim) > max_dims) {
    fail(Status::kInvalidArgument, "work_dim = {} is not between 1 and {}", work_dim, max_dims);
  }
  if (global == nullptr) fail(Status::kInvalidArgument, "global_size is NULL");
  // Work-items are counted in size_t and runtimes round global sizes up to whole work-groups
  // (PoCL corrupts its heap on a global size near SIZE_MAX), so the range stops one bit short.
  std::uint64_t address_limit =
      (std::uint64_t{1} << (std::min<std::uint32_t>(info.address_bits, 64) - 1)) - 1;
  bool empty = false;
  for (int d = 0; d < work_dim; ++d) {
    if (global[d] == 0) empty = true;
    if (global[d] > address_limit) {
      fail(Status::kInvalidArgument, "global_size[{}] = {} exceeds 2^{} - 1 work-items", d,
           global[d], std::min<std::uint32_t>(info.address_bits, 64) - 1);
    }
  }
  std::optional<std::uint64_t> items = 1;
  for (int d = 0; d < work_dim && !empty && items; ++d) items = checked_mul(*items, global[d]);
  if (!empty && (!items || *items > address_limit)) {
    fail(Status::kInvalidArgument, "global_size {} has more than 2^{} - 1 work-items",
         fmt::join(global, global + work_dim, " x "),
         std::min<std::uint32_t>(info.address_bits, 64) - 1);
  }
  if (local != nullptr) {
    std::uint64_t group = 1;
    for (int d = 0; d < work_dim; ++d) {
      std::size_t limit = d < static_cast<int>(info.max_work_item_sizes.size())
                              ? info.max_work_item_sizes[d]
                              : info.max_work_group_size;
      if (local[d] == 0) fail(Status::kInvalidArgument, "local_size[{}] is 0", d);
      if (local[d] > limit) {
        fail(Status::kInvalidArgument,
             "local_size[{}] = {} exceeds the device's limit of {} work-items in dimension {}", d,
             local[d], limit, d);
      }
      group *= local[d];  // <= 3 factors each below 2^32 on any real device: no overflow
      if (global[d] % local[d] != 0) {
        fail(Status::kInvalidArgument,
             "global_size[{}] = {} is not a multiple of local_size[{}] = {}", d, global[d], d,
             local[d]);
      }
    }
    std::size_t group_limit =
        std::min(kernel.kernel.max_work_group_size, info.max_work_group_size);
    if (group > group_limit) {
      fail(Status::kInvalidArgument,
           "local_size {} = {} work-items exceeds kernel '{}''s work-group limit of {} on this "
           "device",
           fmt::join(local, local + work_dim, " x "), group, kernel.kernel.name, group_limit);
    }
  }
  return !empty;
}

}  // namespace

void launch_user_kernel(DeviceCall& call, void* kernel_token, void* stream, int work_dim,
                        const size_t* global_size, const size_t* local_size, int num_args,
                        const aethercl_arg* args) {
  std::shared_ptr<UserKernel> kernel = call.runtime().user_kernels().get(kernel_token, "kernel");
  Device& device = call.device();
  if (kernel->device_index != device.index()) {
    fail(Status::kInvalidHandle,
         "kernel ({}) belongs to device {}, but this call runs on device {}", kernel_token,
         kernel->device_index, device.index());
  }
  call.use_stream(stream, "stream");  // before the buffers, which note the stream they serve
  bool has_work = check_geometry(device.info(), *kernel, work_dim, global_size, local_size);
  LaunchRecord record;
  record.kernel = &kernel->kernel;
  record.args = prepare_args(call, *kernel, num_args, args);
  record.geometry = LaunchGeometry::grid(static_cast<cl_uint>(work_dim), global_size, local_size);
  record.entry_point = current_entry_point();
  record.owner = kernel;  // the kernel outlives a record still waiting to be submitted
  if (!has_work) return;
  try {
    call.enqueue(record);
  } catch (const Error& error) {
    // Without argument types (some binaries, SPIR-V) OpenCL is the one to refuse an argument.
    fail(error.status(), "launching kernel '{}': {}", kernel->kernel.name, error.what());
  }
}

}  // namespace aethercl::ops
