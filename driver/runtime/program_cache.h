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
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace aethercl {

struct ProgramStats {
  std::uint64_t programs = 0;
  std::uint64_t kernels = 0;
  std::uint64_t source_builds = 0;
  std::uint64_t disk_hits = 0;
};

// A rewrite of a built program's binary before it is loaded again with clCreateProgramWithBinary
// (NVIDIA's binaries are PTX text: gemm/wgmma.cpp retargets them to sm_90a). `id` names the
// rewrite and its version in the cache keys, so a rewritten program never shares an entry with
// the program it came from or with another rewrite of it.
struct BinaryPatch {
  std::string id;
  std::function<std::string(const std::string& binary)> apply;  // throws Error to refuse
};

class ProgramCache {
 public:
  ProgramCache(const DeviceInfo& info, cl_context context, BinaryCache disk);

  // Options every family is built with on this device: -cl-std, AETHERCL_FP64, ...
  const std::string& base_options() const { return base_options_; }

  // Throws Error(kBuildFailed) with the build log when the family does not build.
  Kernel& kernel(const std::string& family, const std::string& name,
                 const std::string& extra_options = "");
  // kernel(family, name) without options, memoised by the strings' addresses (one hash lookup
  // and a string comparison per call for string literals). Any strings work: an address that
  // now holds other text is noticed by the comparison and looked up again.
  Kernel& literal_kernel(const char* family, const char* name);

  // The kernel from the family's binary rewritten by patch (built from source first, or both
  // programs from the disk cache). Throws Error(kBuildFailed) with the log when either the
  // source or the rewritten binary does not build, or the patch refuses the binary.
  Kernel& kernel(const std::string& family, const std::string& name,
                 const std::string& extra_options, const BinaryPatch& patch);

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
  cl::Program build_patched(const std::string& family, const std::string& options,
                            const BinaryPatch& patch);
  Kernel& kernel_of(Built& built, const std::string& family, const std::string& name);

  const DeviceInfo& info_;
  cl_context context_;
  BinaryCache disk_;
  std::string base_options_;
  std::map<std::string, Built> programs_;  // family + '|' + options
  struct LiteralKeyHash {
    std::size_t operator()(const std::pair<const char*, const char*>& key) const noexcept {
      return std::hash<const void*>()(key.first) * 31 + std::hash<const void*>()(key.second);
    }
  };
  struct LiteralEntry {
    Kernel* kernel;
    std::string family;
  };
  std::unordered_map<std::pair<const char*, const char*>, LiteralEntry, LiteralKeyHash> literals_;
  ProgramStats stats_;
};

}  // namespace aethercl
