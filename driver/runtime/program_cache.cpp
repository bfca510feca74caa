// Lazy program builds with an on-disk binary cache.
#include "runtime/program_cache.h"

#include "cl/cl_error.h"
#include "runtime/kernel_sources.h"
#include "runtime/program_build.h"
#include "support/env.h"
#include "support/log.h"

#include <string_view>

namespace aethercl {

namespace {

constexpr std::string_view kShuffleOn = "-DACL_WARP_SHUFFLE=1";

// `options` with the warp-shuffle define turned off (unchanged where it is not on).
std::string shuffle_off(std::string options) {
  const auto at = options.find(kShuffleOn);
  if (at != std::string::npos) options[at + kShuffleOn.size() - 1] = '0';
  return options;
}

}  // namespace

ProgramCache::ProgramCache(const DeviceInfo& info, cl_context context, BinaryCache disk)
    : info_(info), context_(context), disk_(std::move(disk)) {
  // The branch-free math of kernels/fastmath.cl measured faster than the built-ins on PoCL's CPU
  // device (docs/PERFORMANCE.md); GPUs keep their built-ins, which were not measured slower.
  bool fast_math = env::flag(env::kFastMath, info.kind == DeviceKind::kCpu);
  // Warp shuffles through inline PTX (shfl.sync, Volta and later) for the row reductions: the
  // work-items of a group are numbered into warps of 32 in order on NVIDIA GPUs.
  bool warp_shuffle = info.kind == DeviceKind::kGpu && info.nv_compute_capability >= 70 &&
                      env::flag(env::kWarpShuffle, true);
  base_options_ = fmt::format(
      "-cl-std=CL1.2 -DAETHERCL_FP64={} -DAETHERCL_MAX_WG={} -DAETHERCL_FAST_MATH={}"
      " -DACL_WARP_SHUFFLE={}",
      info.fp64 ? 1 : 0, info.max_work_group_size, fast_math ? 1 : 0, warp_shuffle ? 1 : 0);
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
  // A family that uses the shuffles and fails with them is built again without.
  const std::string without_shuffle = shuffle_off(options);
  if (status != CL_SUCCESS && without_shuffle != options &&
      source.find("ACL_WARP_SHUFFLE") != std::string::npos) {
    log().warn("kernel family '{}' failed to build with warp shuffles for {} ({}); building it "
               "with local-memory reductions instead:\n{}",
               family, info_.name, cl::error_name(status), build_log(program.get(), info_.id));
    return build(family, without_shuffle);
  }
  if (status != CL_SUCCESS) {
    fail(Status::kBuildFailed, "kernel family '{}' failed to build for {} ({}; options '{}'):\n{}",
         family, info_.name, cl::error_name(status), options, build_log(program.get(), info_.id));
  }
  ++stats_.source_builds;
  // Only with the cache on: on PoCL, asking for the binary compiles every kernel of the family
  // (a cold test suite spent most of its time there: docs/DEVICES.md).
  if (disk_.enabled()) disk_.store(key, program_binary(program.get()));
  return program;
}

Kernel& ProgramCache::literal_kernel(const char* family, const char* name) {
  auto key = std::make_pair(family, name);
  auto it = literals_.find(key);
  if (it != literals_.end() && it->second.kernel->name == name && it->second.family == family) {
    return *it->second.kernel;
  }
  Kernel& built = kernel(family, name);
  literals_[key] = LiteralEntry{&built, family};
  return built;
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
  return kernel_of(it->second, family, name);
}

Kernel& ProgramCache::kernel(const std::string& family, const std::string& name,
                             const std::string& extra_options, const BinaryPatch& patch) {
  std::string options =
      extra_options.empty() ? base_options_ : base_options_ + " " + extra_options;
  std::string program_key = family + "|" + options + "|patch " + patch.id;
  auto it = programs_.find(program_key);
  if (it == programs_.end()) {
    Built built{build_patched(family, options, patch), {}};
    it = programs_.emplace(program_key, std::move(built)).first;
    ++stats_.programs;
  }
  return kernel_of(it->second, family, name);
}

cl::Program ProgramCache::build_patched(const std::string& family, const std::string& options,
                                        const BinaryPatch& patch) {
  // The key covers the source, the options, the device and driver and the patch's id.
  const std::string key = cache_key(kernel_source(family) + "\n/* binary patch: " + patch.id +
                                        " */",
                                    options);
  if (auto binary = disk_.load(key)) {
    if (cl::Program program =
            program_from_binary(context_, info_, binary->data(), binary->size(), options)) {
      ++stats_.disk_hits;
      return program;
    }
  }
  cl::Program original = build(family, options);
  size_t size = 0;
  cl::check(clGetProgramInfo(original.get(), CL_PROGRAM_BINARY_SIZES, sizeof(size), &size,
                             nullptr),
            "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
  std::string binary(size, '\0');
  unsigned char* target = reinterpret_cast<unsigned char*>(binary.data());
  cl::check(clGetProgramInfo(original.get(), CL_PROGRAM_BINARIES, sizeof(target), &target,
                             nullptr),
            "clGetProgramInfo(CL_PROGRAM_BINARIES)");
  const std::string patched = patch.apply(binary);
  const auto* data = reinterpret_cast<const unsigned char*>(patched.data());
  size_t patched_size = patched.size();
  cl_int binary_status = CL_SUCCESS;
  cl_int status = CL_SUCCESS;
  cl::Program program(clCreateProgramWithBinary(context_, 1, &info_.id, &patched_size, &data,
                                                &binary_status, &status));
  if (status != CL_SUCCESS || binary_status != CL_SUCCESS) {
    fail(Status::kBuildFailed, "kernel family '{}' rewritten by '{}' is refused as a binary ({})",
         family, patch.id, cl::error_name(status != CL_SUCCESS ? status : binary_status));
  }
  status = clBuildProgram(program.get(), 1, &info_.id, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    fail(Status::kBuildFailed, "kernel family '{}' rewritten by '{}' failed to build for {} "
         "({}):\n{}", family, patch.id, info_.name, cl::error_name(status),
         build_log(program.get(), info_.id));
  }
  disk_.store(key, std::vector<unsigned char>(patched.begin(), patched.end()));
  return program;
}

Kernel& ProgramCache::kernel_of(Built& built, const std::string& family,
                                const std::string& name) {
  auto& kernels = built.kernels;
  auto kernel_it = kernels.find(name);
  if (kernel_it != kernels.end()) return kernel_it->second;
  cl_int status = CL_SUCCESS;
  Kernel kernel;
  kernel.handle = cl::Kernel(clCreateKernel(built.program.get(), name.c_str(), &status));
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
