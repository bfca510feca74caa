// GEMM tuning database: the tuning file's location, load/store and keying, the built-in table.
#include "gemm/database.h"

#include "support/error.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

using namespace aethercl;
using namespace aethercl::gemm;

namespace {

constexpr GemmLimits kRoomy{1024, 64 * 1024};

std::filesystem::path fresh_file(const char* name) {
  auto directory = std::filesystem::temp_directory_path() / "aethercl-unit-gemm-tuning";
  std::filesystem::create_directories(directory);
  auto path = directory / name;
  std::filesystem::remove(path);
  return path;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

const GemmTuningKey kKey{"Test Device 9000", "3.1 (driver)", "0.1.0"};
const GemmParamSet kSet{{128, 64, 8, 8, 4, 4, 4, 1, 0}, {32, 32, 8, 2, 2, 2, 2, 0, 0}};

}  // namespace

TEST_CASE("the tuning file lives next to the kernel cache unless AETHERCL_TUNING_FILE says") {
  const char* saved = std::getenv("AETHERCL_CACHE_DIR");
  std::string saved_value = saved ? saved : "";
  unsetenv("AETHERCL_TUNING_FILE");
  setenv("AETHERCL_CACHE_DIR", "/tmp/aethercl-cache-here", 1);
  CHECK(gemm_tuning_path() == std::filesystem::path("/tmp/aethercl-cache-here/gemm_tuning.tsv"));
  setenv("AETHERCL_TUNING_FILE", "/elsewhere/tuning.tsv", 1);
  CHECK(gemm_tuning_path() == std::filesystem::path("/elsewhere/tuning.tsv"));
  unsetenv("AETHERCL_TUNING_FILE");
  if (saved) {
    setenv("AETHERCL_CACHE_DIR", saved_value.c_str(), 1);
  } else {
    unsetenv("AETHERCL_CACHE_DIR");
  }
}

TEST_CASE("store then load round-trips, keyed by device, driver and library version") {
  auto path = fresh_file("roundtrip.tsv");
  CHECK_FALSE(load_gemm_tuning(path, kKey, DeviceKind::kGpu));  // no file yet
  store_gemm_tuning(path, kKey, kSet);
  auto loaded = load_gemm_tuning(path, kKey, DeviceKind::kGpu);
  REQUIRE(loaded);
  CHECK(*loaded == kSet);
  for (GemmTuningKey other : {GemmTuningKey{"Test Device 9001", kKey.driver, kKey.library},
                              GemmTuningKey{kKey.device, "3.2 (driver)", kKey.library},
                              GemmTuningKey{kKey.device, kKey.driver, "0.2.0"}}) {
    CAPTURE(other.device);
    CAPTURE(other.driver);
    CAPTURE(other.library);
    CHECK_FALSE(load_gemm_tuning(path, other, DeviceKind::kGpu));
  }
}

TEST_CASE("storing replaces the key's entry and keeps the others") {
  auto path = fresh_file("replace.tsv");
  GemmTuningKey other{"Other Device", "1.0", "0.1.0"};
  GemmParamSet other_set{{64, 64, 16, 4, 4, 4, 4, 1, 0}, {16, 16, 16, 2, 2, 1, 1, 1, 0}};
  store_gemm_tuning(path, kKey, kSet);
  store_gemm_tuning(path, other, other_set);
  GemmParamSet changed = kSet;
  changed.large.tile_k = 16;
  store_gemm_tuning(path, kKey, changed);
  CHECK(*load_gemm_tuning(path, kKey, DeviceKind::kGpu) == changed);
  CHECK(*load_gemm_tuning(path, other, DeviceKind::kGpu) == other_set);
  std::string text = read_all(path);
  CHECK(text.rfind("# ", 0) == 0);  // one header comment
  CHECK(text.find(kKey.device) == text.rfind(kKey.device));  // one entry per key
  CHECK_THROWS_AS(store_gemm_tuning(path, GemmTuningKey{"tab\there", "1", "2"}, kSet), Error);
}

TEST_CASE("entries may give a subset of keys; malformed entries are skipped") {
  auto path = fresh_file("handwritten.tsv");
  {
    std::ofstream file(path);
    file << "# comment\n\n"
         << "Test Device 9000\t3.1 (driver)\t0.1.0\ttile_k=8\n"                    // 4 fields
         << "Test Device 9000\t3.1 (driver)\t0.1.0\tbogus=1\ttile_k=8\n"            // bad key
         << "Test Device 9000\t3.1 (driver)\t0.1.0\ttile_m=8,wpt_m=3\ttile_k=8\n"   // bad shape
         << "Test Device 9000\t3.1 (driver)\t0.1.0\ttile_k=32\twpt_n=2,vec=2\r\n";  // good, CRLF
  }
  auto loaded = load_gemm_tuning(path, kKey, DeviceKind::kGpu);
  REQUIRE(loaded);
  auto defaults = gemm_param_candidates(DeviceKind::kGpu);
  GemmParams large = defaults[0];
  large.tile_k = 32;
  GemmParams small = defaults[1];
  small.wpt_n = 2;
  small.vec = 2;
  CHECK(loaded->large == large);
  CHECK(loaded->small == small);
}

TEST_CASE("the built-in table matches name substrings and its entries are valid") {
  auto avx512 = builtin_gemm_params("pthread-skylake-avx512-Intel(R) Xeon(R) Processor",
                                    DeviceKind::kCpu);
  REQUIRE(avx512);
  CHECK(avx512->large.direct == 1);
  CHECK_FALSE(gemm_params_problem(avx512->large, kRoomy));
  CHECK_FALSE(gemm_params_problem(avx512->small, kRoomy));
  CHECK_FALSE(builtin_gemm_params("Unknown Device", DeviceKind::kGpu));
}
