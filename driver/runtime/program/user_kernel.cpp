// Kernel creation: parameter kinds, types and sizes, and the kernel's work-group limits.
#include "runtime/program/user_kernel.h"

#include "cl/cl_error.h"
#include "runtime/device_info.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace aethercl {
namespace {

// False when the runtime keeps no argument info (CL_KERNEL_ARG_INFO_NOT_AVAILABLE); any other
// failure of the query throws, naming it, rather than passing for a parameter of no type.
bool arg_info_available(cl_int status) {
  if (status == CL_KERNEL_ARG_INFO_NOT_AVAILABLE) return false;
  cl::check(status, "clGetKernelArgInfo");
  return true;
}

std::optional<std::string> arg_string(cl_kernel kernel, cl_uint index, cl_kernel_arg_info what) {
  size_t size = 0;
  if (!arg_info_available(clGetKernelArgInfo(kernel, index, what, 0, nullptr, &size)))
    return std::nullopt;
  std::string text(size, '\0');
  if (!arg_info_available(clGetKernelArgInfo(kernel, index, what, size, text.data(), nullptr)))
    return std::nullopt;
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

// Fills the parameter table; false when the runtime reports no argument info.
bool describe_parameters(UserKernel& kernel, cl_uint count, std::uint32_t address_bits) {
  kernel.parameters.assign(count, KernelParameter{});
  for (cl_uint i = 0; i < count; ++i) {
    cl_kernel_arg_address_qualifier qualifier = 0;
    if (!arg_info_available(clGetKernelArgInfo(kernel.kernel.handle.get(), i,
                                               CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(qualifier),
                                               &qualifier, nullptr))) {
      kernel.parameters.assign(count, KernelParameter{});
      return false;
    }
    KernelParameter& parameter = kernel.parameters[i];
    parameter.type = arg_string(kernel.kernel.handle.get(), i, CL_KERNEL_ARG_TYPE_NAME).value_or("");
    parameter.name = arg_string(kernel.kernel.handle.get(), i, CL_KERNEL_ARG_NAME).value_or("");
    parameter.kind = arg_kind_of(qualifier, parameter.type);
    if (parameter.kind == ArgKind::kScalar && !parameter.type.empty()) {
      parameter.size = scalar_type_size(parameter.type, address_bits);
    }
  }
  return true;
}

template <typename T>
T work_group_info(cl_kernel kernel, cl_device_id device, cl_kernel_work_group_info what) {
  T value{};
  cl::check(clGetKernelWorkGroupInfo(kernel, device, what, sizeof(value), &value, nullptr),
            "clGetKernelWorkGroupInfo");
  return value;
}

std::string json_or_null(const std::string& text) {
  return text.empty() ? std::string("null") : fmt::format("\"{}\"", json_escape(text));
}

}  // namespace

std::shared_ptr<UserKernel> create_user_kernel(std::shared_ptr<const UserProgram> program,
                                               const DeviceInfo& info, const char* name) {
  if (name == nullptr) fail(Status::kInvalidArgument, "name is NULL");
  std::string wanted(name);
  bool known = false;
  for (const auto& kernel_name : program->kernel_names) known = known || kernel_name == wanted;
  if (!known && !program->kernel_names.empty()) {
    fail(Status::kInvalidArgument, "name '{}' is not a kernel of the program (its kernels: {})",
         json_escape(wanted), fmt::join(program->kernel_names, ", "));
  }
  cl_int status = CL_SUCCESS;
  cl::Kernel handle(clCreateKernel(program->program.get(), wanted.c_str(), &status));
  if (status == CL_INVALID_KERNEL_NAME || status == CL_INVALID_KERNEL_DEFINITION) {
    fail(Status::kInvalidArgument, "name '{}' is not a kernel of the program ({})",
         json_escape(wanted), cl::error_name(status));
  }
  cl::check(status, "clCreateKernel");
  auto kernel = std::make_shared<UserKernel>();
  kernel->device_index = program->device_index;
  kernel->program = std::move(program);
  kernel->kernel.handle = std::move(handle);
  kernel->kernel.name = wanted;
  cl_uint count = 0;
  cl::check(clGetKernelInfo(kernel->kernel.get(), CL_KERNEL_NUM_ARGS, sizeof(count), &count,
                            nullptr),
            "clGetKernelInfo");
  kernel->arg_info = describe_parameters(*kernel, count, info.address_bits);
  cl_kernel raw = kernel->kernel.get();
  kernel->kernel.max_work_group_size =
      work_group_info<size_t>(raw, info.id, CL_KERNEL_WORK_GROUP_SIZE);
  kernel->local_mem_bytes = work_group_info<cl_ulong>(raw, info.id, CL_KERNEL_LOCAL_MEM_SIZE);
  kernel->private_mem_bytes = work_group_info<cl_ulong>(raw, info.id, CL_KERNEL_PRIVATE_MEM_SIZE);
  kernel->preferred_multiple =
      work_group_info<size_t>(raw, info.id, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE);
  return kernel;
}

std::string kernel_info_json(const UserKernel& kernel) {
  std::string args;
  for (std::size_t i = 0; i < kernel.parameters.size(); ++i) {
    const KernelParameter& parameter = kernel.parameters[i];
    args += fmt::format(
        "{}{{\"index\": {}, \"kind\": \"{}\", \"type\": {}, \"name\": {}, \"size\": {}}}",
        i == 0 ? "" : ", ", i, arg_kind_name(parameter.kind), json_or_null(parameter.type),
        json_or_null(parameter.name),
        parameter.size ? std::to_string(*parameter.size) : std::string("null"));
  }
  return fmt::format(
      "{{\"name\": \"{}\", \"num_args\": {}, \"args\": [{}], \"max_work_group_size\": {}, "
      "\"local_mem_bytes\": {}, \"private_mem_bytes\": {}, "
      "\"preferred_work_group_size_multiple\": {}, \"arg_info\": {}, \"device\": {}}}",
      json_escape(kernel.kernel.name), kernel.parameters.size(), args,
      kernel.kernel.max_work_group_size,
      kernel.local_mem_bytes, kernel.private_mem_bytes, kernel.preferred_multiple,
      kernel.arg_info, kernel.device_index);
}

}  // namespace aethercl
