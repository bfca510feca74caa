// Kernel sources: embedded from kernels/*.cl at build time, or read from AETHERCL_KERNEL_DIR.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace aethercl {

// The family whose text (kernels/fastmath.cl) is prepended to every other family's source.
inline constexpr std::string_view kSharedMathFamily = "fastmath";

// The source of a kernel family ("elementwise" for kernels/elementwise.cl), with every line
// `#include "other.cl"` replaced by that family's source and, for every family but
// kSharedMathFamily, the shared math source prepended. Throws Error(kBuildFailed) for an unknown
// family (included ones too) or an unreadable override file.
std::string kernel_source(std::string_view family);

// Families embedded in this build, sorted.
std::vector<std::string> embedded_kernel_families();

}  // namespace aethercl
