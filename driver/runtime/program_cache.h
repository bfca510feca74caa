// Per-device program cache: each kernel family is built on first use with device -D options,
// reusing binaries from the on-disk cache; kernels are created once and reused.
//
// Contract: the owning Device's mutex is held for every call; returned kernels are owned here and
// stay valid (at the same address) until the cache is destroyed.
#pragma once

#include "cl/handle.h"
#include "runtime/binary_cache.h"
#include "runtime/device_info.h"
#include "runtime/kernel.h"

#include <cstdint>
#include <map>
#include <string>

namespace aethercl {

struct ProgramStats {
  std::uint64_t programs = 0;
  std::uint64_t kernels = 0;
  std::uint64_t source_builds = 0;
  std::uint64_t disk_hits = 0;
};

class ProgramCache {
 public:
  ProgramCache(const DeviceInfo& info, cl_context context, BinaryCache disk);

  // Options every family is built with on this device: -cl-std, AETHERCL_FP64, ...
  const std::string& base_options() const { return base_options_; }

  // Throws Error(kBuildFailed) with the build log when the family does not build.
  Kernel& kernel(const std::string& family, const std::string& name,
                 const std::string& extra_options = "");

  // The on-disk cache key of a family built with extra_options (exposed for tests).
  std::string cache_key(const std::string& source, const std::string& options) const;

  const ProgramStats& stats() const { return stats_; }
  const BinaryCache& disk() const { return disk_; }

 private:
  struct Built {
    cl::Program program;
    std::map<std::string, Kernel> kernels;  // map nodes keep their address
  };
  cl::Program build(const std::string& family, const std::string& options);

  const DeviceInfo& info_;
  cl_context context_;
  BinaryCache disk_;
  std::string base_options_;
  std::map<std::string, Built> programs_;  // family + '|' + options
  ProgramStats stats_;
};

}  // namespace aethercl
