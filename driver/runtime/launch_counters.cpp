// Zeroed counter buffers for single-launch hand-offs between work-groups.
#include "runtime/launch_counters.h"

#include "cl/cl_error.h"

#include <cstdint>
#include <vector>

namespace aethercl {

cl::Mem make_launch_counters(cl_context context, std::size_t count) {
  std::vector<std::uint32_t> zeros(count == 0 ? 1 : count, 0);
  cl_int status = CL_SUCCESS;
  cl::Mem mem(clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                             zeros.size() * sizeof(std::uint32_t), zeros.data(), &status));
  cl::check(status, "clCreateBuffer");
  return mem;
}

}  // namespace aethercl
