// The on-disk binary cache is never a point of failure: entries that cannot be read (directory,
// FIFO, device, I/O error, absurd size) are misses, and failed writes are skipped.
#include "runtime/binary_cache.h"
#include "runtime/kernel_sources.h"
#include "runtime/program_cache.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace aethercl;

namespace {

const std::string kKey = "0123456789abcdef0123456789abcdef";

std::filesystem::path fresh_directory(const char* name) {
  auto path = std::filesystem::temp_directory_path() /
              (std::string("aethercl-unit-cache-") + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

// Opens the FIFO's write end (and closes it) if a reader shows up within the deadline, so a
// loader that blocked in open() is released instead of hanging the test binary.
class FifoUnblocker {
 public:
  explicit FifoUnblocker(std::filesystem::path fifo)
      : thread_([this, fifo = std::move(fifo)] {
          auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
          while (!stop_ && std::chrono::steady_clock::now() < deadline) {
            int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
            if (fd >= 0) {
              ::close(fd);
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          }
        }) {}
  ~FifoUnblocker() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// load() must answer a miss at once, without throwing.
void check_quick_miss(const BinaryCache& disk, const std::string& key) {
  auto start = std::chrono::steady_clock::now();
  std::optional<std::vector<unsigned char>> loaded;
  CHECK_NOTHROW(loaded = disk.load(key));
  CHECK_FALSE(loaded.has_value());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500));
}

}  // namespace

TEST_CASE("an entry that exists but cannot be read is a cache miss") {
  auto directory = fresh_directory("unreadable");
  BinaryCache disk(directory, true);
  auto path = disk.path_for(kKey);
  SUBCASE("a directory by the entry's name") {
    std::filesystem::create_directories(path / "inside");
    check_quick_miss(disk, kKey);
    CHECK(std::filesystem::is_directory(path / "inside"));  // not the cache's to delete
  }
  SUBCASE("a FIFO by the entry's name (open must not block)") {
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    FifoUnblocker unblocker(path);
    check_quick_miss(disk, kKey);
  }
  SUBCASE("an I/O error after a successful open (/proc/self/mem reads EIO at 0)") {
    std::filesystem::create_symlink("/proc/self/mem", path);
    check_quick_miss(disk, kKey);
  }
  SUBCASE("a character device") {
    std::filesystem::create_symlink("/dev/zero", path);
    check_quick_miss(disk, kKey);
  }
  SUBCASE("a file far larger than any entry is not read") {
    { std::ofstream file(path); }
    std::filesystem::resize_file(path, BinaryCache::kMaxEntryBytes + 1);  // sparse
    check_quick_miss(disk, kKey);
  }
  std::filesystem::remove_all(directory);
}

TEST_CASE("a failed cache write is skipped") {
  auto directory = fresh_directory("unwritable");
  std::vector<unsigned char> payload(100, 7);
  SUBCASE("the cache directory is a regular file") {
    auto file_path = directory / "not-a-directory";
    { std::ofstream file(file_path); }
    BinaryCache disk(file_path / "cache", true);
    CHECK_NOTHROW(disk.store(kKey, payload));
    CHECK_FALSE(disk.load(kKey).has_value());
  }
  SUBCASE("a non-empty directory holds the entry's name") {
    BinaryCache disk(directory, true);
    std::filesystem::create_directories(disk.path_for(kKey) / "inside");
    CHECK_NOTHROW(disk.store(kKey, payload));
    CHECK_FALSE(disk.load(kKey).has_value());
    for (const auto& entry : std::filesystem::directory_iterator(directory)) {
      CHECK(entry.path().filename().string().find(".tmp.") == std::string::npos);  // cleaned up
    }
  }
  SUBCASE("an entry that can be written is read back") {
    BinaryCache disk(directory, true);
    disk.store(kKey, payload);
    CHECK(disk.load(kKey) == payload);
  }
  std::filesystem::remove_all(directory);
}

TEST_CASE("an unreadable entry of a kernel family: the family is built from source") {
  Device& device = testing::test_device();
  auto directory = fresh_directory("family");
  ProgramCache probe(device.info(), device.context(), BinaryCache(directory, false));
  auto path = BinaryCache(directory, true)
                  .path_for(probe.cache_key(kernel_source("elementwise"), probe.base_options()));
  SUBCASE("directory") { std::filesystem::create_directories(path / "inside"); }
  SUBCASE("I/O error") { std::filesystem::create_symlink("/proc/self/mem", path); }
  ProgramCache cache(device.info(), device.context(), BinaryCache(directory, true));
  cl_kernel kernel = nullptr;
  CHECK_NOTHROW(kernel = cache.kernel("elementwise", "elementwise_add_vec4").get());
  CHECK(kernel != nullptr);
  CHECK(cache.stats().source_builds == 1);
  CHECK(cache.stats().disk_hits == 0);
  std::filesystem::remove_all(directory);
}
