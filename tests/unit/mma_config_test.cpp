// Tensor-core tile overrides (AETHERCL_MMA_PARAMS): refused with kInvalidArgument before any check
// divides by, or multiplies, the sizes they name, whichever kernel the product's default picked.
#include "gemm/mma_kernel.h"
#include "gemm/tensor_core_gemm.h"
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
                           "wgmma=1,bm=32,bulk=1,row_bytes=32", "split=-1", "split=65"};
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
        "bm=32,bn=128,wm=16,wn=32,stages=3,tf32_round=1,wgmma=0,inflight=1,bulk=0,row_bytes=128,"
        "split=0");
  CHECK(config.threads() == 256);
  CHECK(config.local_bytes() == 3u * (32 + 128) * 128);
}

TEST_CASE("products of few tiles split k in powers of two within one wave of four groups a unit") {
  const auto slices = [](std::uint64_t m, std::uint64_t n, std::uint64_t k, MmaKind kind,
                         std::uint64_t tiles) {
    GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    return mma_slices(p, kind, tiles, kH100Units);
  };
  CHECK(slices(64, 4096, 4096, MmaKind::kTF32, 64) == 8);     // 8 x 64 groups <= 4 x 132
  CHECK(slices(128, 4096, 4096, MmaKind::kTF32, 128) == 4);
  CHECK(slices(32, 4096, 4096, MmaKind::kBF16, 128) == 4);
  CHECK(slices(16, 768, 3072, MmaKind::k3xTF32, 12) == 8);    // k / 256 = 12 allows 8
  CHECK(slices(64, 1024, 1024, MmaKind::kTF32, 16) == 4);
  CHECK(slices(64, 1024, 1024, MmaKind::kBF16, 16) == 1);     // 16-bit: k of 2048 at least
  CHECK(slices(64, 1024, 2048, MmaKind::kFP16, 16) == 8);
  CHECK(slices(16, 64, 4096, MmaKind::kTF32, 1) == 16);       // slices of 256 at least
  CHECK(slices(16, 64, 65536, MmaKind::kTF32, 1) == 64);      // the most slices
  CHECK(slices(512, 512, 4096, MmaKind::kTF32, 64) == 8);     // partials <= operands: 16
  CHECK(slices(512, 512, 1024, MmaKind::kTF32, 64) == 4);     // 1024 / 256
  CHECK(slices(64, 4096, 300, MmaKind::kTF32, 64) == 1);      // too short to halve
  CHECK(slices(128, 4096, 4096, MmaKind::kTF32, kH100Units) == 1);  // fills the device
  GemmProblem p;
  p.m = 64;
  p.n = 4096;
  p.k = 4096;
  p.batch = 2;
  CHECK(mma_slices(p, MmaKind::kTF32, 64, kH100Units) == 1);  // batches stay whole
  p.batch = 1;
  p.beta = 0.5f;
  CHECK(mma_slices(p, MmaKind::kTF32, 64, kH100Units) == 1);  // so do products reading C
}

TEST_CASE("an empty product is never split") {
  GemmProblem p;
  p.m = 0;
  p.n = 4096;
  p.k = 4096;
  CHECK(mma_slices(p, MmaKind::kTF32, 0, kH100Units) == 1);
  p.m = 16;
  p.n = 0;
  CHECK(mma_slices(p, MmaKind::kBF16, 0, kH100Units) == 1);
}

TEST_CASE("3xTF32 of 65-128 rows takes one 128-row mma.sync tile") {
  const std::string tall =
      "bm=128,bn=64,wm=64,wn=32,stages=3,tf32_round=1,wgmma=0,inflight=1,bulk=0,row_bytes=64,"
      "split=0";
  GemmProblem p;
  p.n = 8192;
  p.k = 8192;
  const auto config_of = [&](MmaKind kind, bool warpgroup) {
    return mma_config(p, kind, kH100Units, warpgroup, MmaMode::kHardware).to_string();
  };
  for (std::uint64_t m : {65, 96, 128}) {
    p.m = m;
    CHECK(config_of(MmaKind::k3xTF32, true) == tall);
    CHECK(config_of(MmaKind::k3xTF32, false) == tall);
    CHECK(config_of(MmaKind::kTF32, true) != tall);
  }
  for (std::uint64_t m : {64, 129}) {  // the warpgroup kernel, as before
    p.m = m;
    CHECK(config_of(MmaKind::k3xTF32, true) != tall);
  }
  p.m = 128;
  p.batch = 2;  // batches keep the earlier choice
  CHECK(config_of(MmaKind::k3xTF32, true) != tall);
}

TEST_CASE("16-bit warpgroup products of under two 128 x 128 tiles per unit take 64-row tiles") {
  const auto config_of = [](std::uint64_t m, std::uint64_t n, std::uint64_t k, MmaKind kind) {
    GemmProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    return mma_config(p, kind, kH100Units, true, MmaMode::kHardware);
  };
  for (MmaKind kind : {MmaKind::kBF16, MmaKind::kFP16}) {
    CAPTURE(static_cast<int>(kind));
    // A GPT's 4096 x 512 products: 128 tiles of 128 x 128 on 132 units.
    const MmaConfig narrow = config_of(4096, 512, 2048, kind);
    CHECK(narrow.wgmma == 1);
    CHECK(narrow.bulk == 0);
    CHECK(narrow.bm == 64);
    CHECK(narrow.threads() == 128);
    // 512 tiles fill the device twice: 128-row tiles, as before.
    const MmaConfig wide = config_of(4096, 2048, 512, kind);
    CHECK(wide.wgmma == 1);
    CHECK(wide.bm == 128);
    // Products that repay the bulk kernel's packing keep its configuration.
    CHECK(config_of(4096, 4096, 4096, kind).bulk == 1);
  }
  // TF32 packs both operands either way: the bulk kernel, whatever the tile count.
  CHECK(config_of(4096, 512, 2048, MmaKind::kTF32).bm == 128);
}
