// Tensor-core tile overrides (AETHERCL_MMA_PARAMS): refused with kInvalidArgument before any check
// divides by, or multiplies, the sizes they name, whichever kernel the product's default picked.
#include "gemm/mma_kernel.h"
#include "support/error.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <string>

using namespace aethercl;
using namespace aethercl::gemm;
using aethercl::testing::ScopedEnv;

namespace {

constexpr std::uint32_t kH100Units = 132;

// A decode-like product; batch 17 is how k slices of it arrive, which makes the default the
// warpgroup kernel's.
GemmProblem decode_like(std::uint64_t batch) {
  GemmProblem p;
  p.m = 128;
  p.n = 4096;
  p.k = 240;
  p.batch = batch;
  return p;
}

Status status_of(const std::string& override_text, const GemmProblem& p, MmaKind kind,
                 bool warpgroup, MmaMode mode) {
  ScopedEnv set("AETHERCL_MMA_PARAMS", override_text.c_str());
  try {
    mma_config(p, kind, kH100Units, warpgroup, mode);
  } catch (const Error& error) {
    return error.status();
  }
  return Status::kOk;
}

}  // namespace

TEST_CASE("overrides with zero, negative or huge sizes are refused, never divided by") {
  const char* hostile[] = {"wm=0", "wn=0", "bm=0", "bn=0", "row_bytes=0", "bm=-64", "wm=-16",
                           "wm=2147483647", "bm=1073741824,bn=1073741824,wm=16,wn=16",
                           "wgmma=1,bm=32", "wgmma=1,bm=0,bulk=0",
                           "wgmma=1,bm=32,bulk=1,row_bytes=32"};
  for (const std::string text : hostile) {
    for (MmaKind kind : {MmaKind::kTF32, MmaKind::k3xTF32, MmaKind::kBF16, MmaKind::kFP16}) {
      CAPTURE(text);
      CAPTURE(static_cast<int>(kind));
      CHECK(status_of(text, decode_like(17), kind, true, MmaMode::kHardware) ==
            Status::kInvalidArgument);
      CHECK(status_of(text, decode_like(17), kind, true, MmaMode::kEmulatedWarpgroup) ==
            Status::kInvalidArgument);
    }
  }
  // Valid for mma.sync, but over a warpgroup default (every kind's in hardware, at 17 slices)
  // it leaves a warpgroup tile of 32 rows, hence no work-items: the SIGFPE of an H100 tile sweep.
  for (MmaKind kind : {MmaKind::kTF32, MmaKind::k3xTF32, MmaKind::kBF16, MmaKind::kFP16}) {
    CAPTURE(static_cast<int>(kind));
    CHECK(status_of("bm=32,bn=128,wm=16,wn=32,stages=3,row_bytes=128", decode_like(17), kind,
                    true, MmaMode::kHardware) == Status::kInvalidArgument);
  }
  // The same sizes over the mma.sync defaults.
  for (const std::string text : {"wm=0", "wn=0", "bm=0", "row_bytes=0", "bm=-64", "wm=2147483647",
                           "wgmma=1,bm=32", "wgmma=1,bm=0,bulk=0"}) {
    CAPTURE(text);
    CHECK(status_of(text, decode_like(1), MmaKind::kBF16, true, MmaMode::kHardware) ==
          Status::kInvalidArgument);
    CHECK(status_of(text, decode_like(1), MmaKind::kTF32, false, MmaMode::kEmulated) ==
          Status::kInvalidArgument);
  }
}

TEST_CASE("a skinny override over the mma.sync default is taken as written") {
  ScopedEnv set("AETHERCL_MMA_PARAMS", "bm=32,bn=128,wm=16,wn=32,stages=3,row_bytes=128");
  const MmaConfig config =
      mma_config(decode_like(1), MmaKind::kBF16, kH100Units, true, MmaMode::kHardware);
  CHECK(config.to_string() ==
        "bm=32,bn=128,wm=16,wn=32,stages=3,tf32_round=1,wgmma=0,inflight=1,bulk=0,row_bytes=128");
  CHECK(config.threads() == 256);
  CHECK(config.local_bytes() == 3u * (32 + 128) * 128);
}
