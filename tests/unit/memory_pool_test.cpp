// Caching allocator: size classes, reuse, limits, release-and-retry.
#include "runtime/memory_pool.h"
#include "support/error.h"
#include "test_support.h"

#include <doctest/doctest.h>

using namespace aethercl;

TEST_CASE("size classes round up by at most 25 percent, 256 bytes minimum") {
  CHECK(MemoryPool::size_class(1) == 256);
  CHECK(MemoryPool::size_class(256) == 256);
  CHECK(MemoryPool::size_class(257) == 320);
  CHECK(MemoryPool::size_class(4096) == 4096);
  CHECK(MemoryPool::size_class(4097) == 5120);
  for (std::uint64_t size : {300ull, 1000ull, 65537ull, 1234567ull, (1ull << 40) + 3}) {
    std::uint64_t rounded = MemoryPool::size_class(size);
    CHECK(rounded >= size);
    CHECK(rounded <= size + size / 4 + 256);
  }
}

TEST_CASE("a freed block is reused for the same size class") {
  Device& device = testing::test_device();
  MemoryPool pool(device.context(), 1ull << 30, device.info().max_alloc_bytes, true);
  PoolBlock first = pool.acquire(1000);
  CHECK(first.capacity == MemoryPool::size_class(1000));
  cl_mem mem = first.mem;
  pool.release(first);
  CHECK(pool.stats().bytes_cached == first.capacity);
  PoolBlock second = pool.acquire(1020);  // same class
  CHECK(second.mem == mem);
  CHECK(pool.stats().hits == 1);
  CHECK(pool.stats().misses == 1);
  CHECK(pool.stats().bytes_reserved == second.capacity);
  pool.release(second);
  pool.trim();
  CHECK(pool.stats().bytes_cached == 0);
  CHECK(pool.stats().device_releases == 1);
}

TEST_CASE("the limit is enforced after the cache is released, and the pool recovers") {
  Device& device = testing::test_device();
  const std::uint64_t limit = 1 << 20;
  MemoryPool pool(device.context(), limit, device.info().max_alloc_bytes, true);
  PoolBlock big = pool.acquire(600 << 10);
  pool.release(big);                           // cached, 600 KiB
  PoolBlock other = pool.acquire(700 << 10);   // needs the cache released first
  CHECK(pool.stats().trims == 1);
  CHECK(pool.stats().bytes_cached == 0);
  CHECK_THROWS_AS(pool.acquire(700 << 10), Error);  // 1.4 MiB > 1 MiB
  try {
    pool.acquire(700 << 10);
  } catch (const Error& error) {
    CHECK(error.status() == Status::kOutOfMemory);
    CHECK(std::string(error.what()).find("exhausted") != std::string::npos);
  }
  pool.release(other);
  PoolBlock again = pool.acquire(700 << 10);
  CHECK(again.mem != nullptr);
  pool.release(again);
}

TEST_CASE("a request beyond the device's largest allocation is refused cleanly") {
  Device& device = testing::test_device();
  MemoryPool pool(device.context(), UINT64_MAX, device.info().max_alloc_bytes, true);
  CHECK_THROWS_AS(pool.acquire(device.info().max_alloc_bytes + 1), Error);
  CHECK(pool.stats().bytes_reserved == 0);
}

TEST_CASE("with caching off, freed blocks go straight back to OpenCL") {
  Device& device = testing::test_device();
  MemoryPool pool(device.context(), 1ull << 30, device.info().max_alloc_bytes, false);
  pool.release(pool.acquire(4096));
  CHECK(pool.stats().bytes_cached == 0);
  CHECK(pool.stats().device_releases == 1);
}
