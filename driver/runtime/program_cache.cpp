// Lazy program builds with an on-disk binary cache.
#include "runtime/program_cache.h"

#include "cl/cl_error.h"
#include "runtime/kernel_sources.h"
#include "runtime/program_build.h"
#include "support/log.h"

namespace aethercl {

ProgramCache::ProgramCache(const DeviceInfo& info, cl_context context, BinaryCache disk)
    : info_(info), context_(context), disk_(std::move(disk)) {
  base_options_ = fmt::format("-cl-std=CL1.2 -DAETHERCL_FP64={} -DAETHERCL_MAX_WG={}",
                              info.fp64 ? 1 : 0, info.max_work_group_size);
}

std::string ProgramCache::cache_key(const std::string& source, const std::string& options) const {
  return program_cache_key(info_, "family", source, options);
}

cl::Program ProgramCache::build(const std::string& family, const std::string& options) {
  std::string source = kernel_source(family);
  std::string key = cache_key(source, options);
  if (auto binary = disk_.load(key)) {
    if (cl::Program program =
            program_from_binary(context_, info_, binary->data(), binary->size(), options)) {
      ++stats_.disk_hits;
      return program;
    }
    log().info("cached binary of kernel family '{}' was refused by the runtime; rebuilding",
               family);
  }
  const char* text = source.c_str();
  size_t length = source.size();
  cl_int status = CL_SUCCESS;
  cl::Program program(clCreateProgramWithSource(context_, 1, &text, &length, &status));
  cl::check(status, "clCreateProgramWithSource");
  status = clBuildProgram(program.get(), 1, &info_.id, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    fail(Status::kBuildFailed, "kernel family '{}' failed to build for {} ({}; options '{}'):\n{}",
         family, info_.name, cl::error_name(status), options, build_log(program.get(), info_.id));
  }
  ++stats_.source_builds;
  disk_.store(key, program_binary(program.get()));
  return program;
}

Kernel& ProgramCache::kernel(const std::string& family, const std::string& name,
                             const std::string& extra_options) {
  std::string options =
      extra_options.empty() ? base_options_ : base_options_ + " " + extra_options;
  std::string program_key = family + "|" + options;
  auto it = programs_.find(program_key);
  if (it == programs_.end()) {
    Built built{build(family, options), {}};
    it = programs_.emplace(program_key, std::move(built)).first;
    ++stats_.programs;
  }
  auto& kernels = it->second.kernels;
  auto kernel_it = kernels.find(name);
  if (kernel_it != kernels.end()) return kernel_it->second;
  cl_int status = CL_SUCCESS;
  Kernel kernel;
  kernel.handle = cl::Kernel(clCreateKernel(it->second.program.get(), name.c_str(), &status));
  if (status != CL_SUCCESS) {
    fail(Status::kBuildFailed, "kernel '{}' of family '{}' cannot be created: {} ({})", name,
         family, cl::error_name(status), status);
  }
  kernel.name = name;
  cl::check(clGetKernelWorkGroupInfo(kernel.get(), info_.id, CL_KERNEL_WORK_GROUP_SIZE,
                                     sizeof(kernel.max_work_group_size),
                                     &kernel.max_work_group_size, nullptr),
            "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
  ++stats_.kernels;
  return kernels.emplace(name, std::move(kernel)).first->second;
}

}  // namespace aethercl
