// The fused GEMM epilogue's build option and launch arguments (kernels/gemm_epilogue.cl).
#include "gemm/gemm.h"

#include <fmt/format.h>

namespace aethercl::gemm {

std::string epilogue_options(const GemmEpilogue& epilogue) {
  return epilogue.kind == 0 ? std::string() : fmt::format(" -DGEMM_EPILOGUE={}", epilogue.kind);
}

void add_epilogue_args(LaunchArgs& args, const GemmEpilogue& epilogue, cl_mem c) {
  if (epilogue.kind == 0) return;
  args.add(epilogue.bias.mem != nullptr ? epilogue.bias.mem : c);
  args.add(static_cast<cl_ulong>(epilogue.bias_offset));
  args.add(static_cast<cl_int>(epilogue.bias_storage));
  args.add(epilogue.pre.mem != nullptr ? epilogue.pre.mem : c);
  args.add(static_cast<cl_ulong>(epilogue.pre_offset));
  args.add(static_cast<cl_int>(epilogue.pre.mem != nullptr ? 1 : 0));
  args.add(epilogue.residual.mem != nullptr ? epilogue.residual.mem : c);
  args.add(static_cast<cl_ulong>(epilogue.residual_offset));
  args.add(static_cast<cl_int>(epilogue.residual.mem != nullptr ? 1 : 0));
}

}  // namespace aethercl::gemm
