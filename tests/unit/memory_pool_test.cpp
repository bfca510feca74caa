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

TEST_CASE("a block freed with events waits for them before it is reused") {
  Device& device = testing::test_device();
  MemoryPool pool(device.context(), 1ull << 30, device.info().max_alloc_bytes, true);
  cl_int status = CL_SUCCESS;
  cl_event gate = clCreateUserEvent(device.context(), &status);
  REQUIRE(status == CL_SUCCESS);
  PoolBlock block = pool.acquire(4096, 0);
  cl_mem mem = block.mem;
  std::vector<cl::Event> events;
  clRetainEvent(gate);
  events.emplace_back(gate);
  pool.release(block, std::move(events));  // another stream still uses it until gate completes
  CHECK(pool.stats().bytes_cached == block.capacity);
  PoolBlock other = pool.acquire(4096, 0);
  CHECK(other.mem != mem);  // not yet: a new block
  pool.release(other);
  clSetUserEventStatus(gate, CL_COMPLETE);
  PoolBlock again = pool.acquire(4096, 0);
  CHECK((again.mem == mem || again.mem == other.mem));
  PoolBlock last = pool.acquire(4096, 0);
  CHECK(((again.mem == mem && last.mem == other.mem) || (again.mem == other.mem && last.mem == mem)));
  pool.release(again);
  pool.release(last);
  clReleaseEvent(gate);
}

TEST_CASE("blocks are reused at once on their own stream only") {
  Device& device = testing::test_device();
  MemoryPool pool(device.context(), 1ull << 30, device.info().max_alloc_bytes, true);
  PoolBlock on_seven = pool.acquire(1000, 7);
  cl_mem mem = on_seven.mem;
  pool.release(on_seven);
  PoolBlock on_eight = pool.acquire(1000, 8);
  CHECK(on_eight.mem != mem);
  CHECK(on_eight.stream == 8);
  PoolBlock again = pool.acquire(1000, 7);
  CHECK(again.mem == mem);
  pool.release(again);
  pool.release(on_eight);
}

TEST_CASE("the blocks of a destroyed stream serve any stream once its work has completed") {
  Device& device = testing::test_device();
  MemoryPool pool(device.context(), 1ull << 30, device.info().max_alloc_bytes, true);
  cl_int status = CL_SUCCESS;
  cl_event retired = clCreateUserEvent(device.context(), &status);
  REQUIRE(status == CL_SUCCESS);
  PoolBlock block = pool.acquire(1000, 5);
  cl_mem mem = block.mem;
  pool.release(block);
  pool.retire_stream(5, retired);
  PoolBlock early = pool.acquire(1000, 9);
  CHECK(early.mem != mem);
  clSetUserEventStatus(retired, CL_COMPLETE);
  PoolBlock late = pool.acquire(1000, 9);
  CHECK(late.mem == mem);
  CHECK(late.stream == 9);
  pool.release(early);
  pool.release(late);
  clReleaseEvent(retired);
}
