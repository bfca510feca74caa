// Program cache: lazy build, in-memory hit, on-disk hit, corrupt and truncated entries rebuilt.
#include "runtime/program_cache.h"

#include "runtime/kernel_sources.h"
#include "support/error.h"
#include "support/process.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>


using namespace aethercl;

namespace {

std::filesystem::path fresh_directory(const char* name) {
  auto path = std::filesystem::temp_directory_path() /
              (std::string("aethercl-unit-") + name + "-" + std::to_string(current_process_id()));
  std::filesystem::remove_all(path);
  return path;
}

}  // namespace

TEST_CASE("kernels are embedded at build time") {
  auto families = embedded_kernel_families();
  CHECK(std::find(families.begin(), families.end(), "elementwise") != families.end());
  CHECK(kernel_source("elementwise").find("elementwise_add_vec4") != std::string::npos);
  CHECK_THROWS_AS(kernel_source("no_such_family"), Error);
}

TEST_CASE("a family is built once, then served from memory and from disk") {
  Device& device = testing::test_device();
  auto directory = fresh_directory("hit");
  {
    ProgramCache cache(device.info(), device.context(), BinaryCache(directory, true));
    cl_kernel first = cache.kernel("elementwise", "elementwise_add_vec4").get();
    CHECK(first != nullptr);
    CHECK(cache.kernel("elementwise", "elementwise_add_vec4").get() == first);  // memory hit
    CHECK(cache.stats().source_builds == 1);
    CHECK(cache.stats().disk_hits == 0);
    CHECK(cache.stats().programs == 1);
    cache.kernel("elementwise", "elementwise_mul_vec4");
    CHECK(cache.stats().programs == 1);
    CHECK(cache.stats().kernels == 2);
  }
  ProgramCache second(device.info(), device.context(), BinaryCache(directory, true));
  CHECK(second.kernel("elementwise", "elementwise_add_vec4").get() != nullptr);
  CHECK(second.stats().disk_hits == 1);
  CHECK(second.stats().source_builds == 0);
  std::filesystem::remove_all(directory);
}

TEST_CASE("different build options are different programs and cache entries") {
  Device& device = testing::test_device();
  auto directory = fresh_directory("options");
  ProgramCache cache(device.info(), device.context(), BinaryCache(directory, true));
  std::string source = kernel_source("elementwise");
  CHECK(cache.cache_key(source, "-DA=1") != cache.cache_key(source, "-DA=2"));
  CHECK(cache.cache_key(source, "-DA=1") == cache.cache_key(source, "-DA=1"));
  cache.kernel("elementwise", "elementwise_add_vec4", "-DAETHERCL_TEST_OPTION=1");
  cache.kernel("elementwise", "elementwise_add_vec4", "-DAETHERCL_TEST_OPTION=2");
  CHECK(cache.stats().programs == 2);
  std::filesystem::remove_all(directory);
}

TEST_CASE("a corrupt or truncated cache entry is detected and rebuilt") {
  Device& device = testing::test_device();
  auto directory = fresh_directory("corrupt");
  std::string key;
  {
    ProgramCache cache(device.info(), device.context(), BinaryCache(directory, true));
    cache.kernel("elementwise", "elementwise_add_vec4");
    key = cache.cache_key(kernel_source("elementwise"), cache.base_options());
  }
  BinaryCache disk(directory, true);
  auto path = disk.path_for(key);
  REQUIRE(std::filesystem::exists(path));
  auto size = std::filesystem::file_size(path);

  SUBCASE("flipped payload byte") {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(size - 1));
    file.put('\x5a' ^ static_cast<char>(size));
  }
  SUBCASE("truncated") { std::filesystem::resize_file(path, size / 2); }
  SUBCASE("garbage header") {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << "not a binary";
  }
  CHECK_FALSE(disk.load(key));
  CHECK_FALSE(std::filesystem::exists(path));  // the bad entry is removed
  ProgramCache cache(device.info(), device.context(), BinaryCache(directory, true));
  CHECK(cache.kernel("elementwise", "elementwise_add_vec4").get() != nullptr);
  CHECK(cache.stats().source_builds == 1);
  CHECK(std::filesystem::exists(path));  // and written again
  std::filesystem::remove_all(directory);
}

TEST_CASE("a build failure carries the build log; other families keep working") {
  Device& device = testing::test_device();
  auto directory = fresh_directory("failure");
  std::filesystem::create_directories(directory / "kernels");
  {
    std::ofstream broken(directory / "kernels" / "elementwise.cl");
    broken << "__kernel void elementwise_add(__global float* a) { this is not OpenCL C; }\n";
  }
  setenv("AETHERCL_KERNEL_DIR", (directory / "kernels").c_str(), 1);
  ProgramCache cache(device.info(), device.context(), BinaryCache(directory, false));
  try {
    cache.kernel("elementwise", "elementwise_add_vec4");
    FAIL("the broken kernel built");
  } catch (const Error& error) {
    CHECK(error.status() == Status::kBuildFailed);
    std::string message = error.what();
    CHECK(message.find("elementwise") != std::string::npos);
    CHECK(message.find("error") != std::string::npos);  // the compiler's log
  }
  unsetenv("AETHERCL_KERNEL_DIR");
  CHECK(cache.kernel("elementwise", "elementwise_add_vec4").get() != nullptr);
  std::filesystem::remove_all(directory);
}

TEST_CASE("warp shuffles: on for NVIDIA GPUs from Volta on; a family that fails with them is "
          "built without") {
  Device& device = testing::test_device();
  auto directory = fresh_directory("shuffle");
  std::filesystem::create_directories(directory / "kernels");
  {
    std::ofstream family(directory / "kernels" / "rowwise.cl");
    family << "#if ACL_WARP_SHUFFLE\n#error this compiler takes no shuffles\n#endif\n"
              "__kernel void rowwise_probe(__global float* a) { a[0] = ACL_WARP_SHUFFLE; }\n";
    std::ofstream broken(directory / "kernels" / "elementwise.cl");
    broken << "__kernel void elementwise_add_vec4(__global float* a) { not OpenCL C; }\n";
  }
  DeviceInfo volta = device.info();
  volta.kind = DeviceKind::kGpu;
  volta.nv_compute_capability = 70;
  DeviceInfo pascal = volta;
  pascal.nv_compute_capability = 61;
  CHECK(ProgramCache(pascal, device.context(), BinaryCache(directory, false))
            .base_options()
            .find("-DACL_WARP_SHUFFLE=0") != std::string::npos);
  setenv("AETHERCL_KERNEL_DIR", (directory / "kernels").c_str(), 1);
  ProgramCache cache(volta, device.context(), BinaryCache(directory, false));
  CHECK(cache.base_options().find("-DACL_WARP_SHUFFLE=1") != std::string::npos);
  CHECK_NOTHROW(cache.kernel("rowwise", "rowwise_probe"));
  CHECK(cache.stats().source_builds == 1);  // the build without shuffles
  // A family that does not use the shuffles fails as it is, not built again without them.
  CHECK_THROWS_WITH_AS(cache.kernel("elementwise", "elementwise_add_vec4"),
                       doctest::Contains("-DACL_WARP_SHUFFLE=1"), Error);
  unsetenv("AETHERCL_KERNEL_DIR");
  std::filesystem::remove_all(directory);
}

TEST_CASE("a rewritten binary is its own program and cache entry, keyed by the rewrite") {
  Device& device = testing::test_device();
  auto directory = fresh_directory("patch");
  int rewrites = 0;
  BinaryPatch identity{"identity 1", [&](const std::string& binary) {
                         ++rewrites;
                         return binary;
                       }};
  BinaryPatch renamed{"identity 2", identity.apply};
  {
    ProgramCache cache(device.info(), device.context(), BinaryCache(directory, true));
    cl_kernel plain = cache.kernel("elementwise", "elementwise_add_vec4").get();
    cl_kernel patched = cache.kernel("elementwise", "elementwise_add_vec4", "", identity).get();
    CHECK(patched != nullptr);
    CHECK(patched != plain);
    CHECK(cache.kernel("elementwise", "elementwise_add_vec4", "", identity).get() == patched);
    CHECK(rewrites == 1);
    cache.kernel("elementwise", "elementwise_add_vec4", "", renamed);  // another id: rewritten again
    CHECK(rewrites == 2);
    CHECK(cache.stats().programs == 3);
  }
  ProgramCache second(device.info(), device.context(), BinaryCache(directory, true));
  CHECK(second.kernel("elementwise", "elementwise_add_vec4", "", identity).get() != nullptr);
  CHECK(rewrites == 2);  // from disk, not rewritten
  CHECK(second.stats().disk_hits == 1);
  std::filesystem::remove_all(directory);
}

TEST_CASE("a rewrite that refuses the binary, or breaks it, fails the build with a message") {
  Device& device = testing::test_device();
  auto directory = fresh_directory("patch-refused");
  ProgramCache cache(device.info(), device.context(), BinaryCache(directory, true));
  BinaryPatch refusing{"refusing", [](const std::string&) -> std::string {
                         fail(Status::kBuildFailed, "not the binary this rewrite expects");
                       }};
  CHECK_THROWS_WITH_AS(cache.kernel("elementwise", "elementwise_add_vec4", "", refusing),
                       doctest::Contains("not the binary"), Error);
  BinaryPatch garbage{"garbage", [](const std::string&) { return std::string("garbage"); }};
  try {
    cache.kernel("elementwise", "elementwise_add_vec4", "", garbage);
    FAIL("a garbage binary was accepted");
  } catch (const Error& error) {
    CHECK(error.status() == Status::kBuildFailed);
    CHECK(std::string(error.what()).find("garbage") != std::string::npos);
  }
  std::filesystem::remove_all(directory);
}
