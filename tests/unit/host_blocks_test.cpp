// Host blocks: aligned real pointers, validated addresses, refusals classified, frees remembered.
#include "ops/sim_ops.h"
#include "runtime/host_blocks.h"
#include "support/error.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace aethercl;

namespace {

// The message of the Error that `body` throws (fails the test if it throws none).
template <typename Body>
std::string refusal(Body&& body, Status expected) {
  try {
    body();
  } catch (const Error& error) {
    CHECK(error.status() == expected);
    return error.what();
  }
  FAIL("no Error thrown");
  return {};
}

}  // namespace

TEST_CASE("blocks are aligned, writable real pointers, found only by their start address") {
  HostBlocks blocks;
  auto block = blocks.allocate(100);
  CHECK(block->address() % HostBlock::kAlignment == 0);
  CHECK(block->size() == 100);
  std::memset(block->data(), 0x5A, 100);  // the whole requested range is ours
  CHECK(blocks.find(block->address(), "address")->data()[99] == 0x5A);
  CHECK(blocks.live_count() == 1);
  CHECK(blocks.live_bytes() == 100);

  std::string inside = refusal([&] { blocks.find(block->address() + 8, "address"); },
                               Status::kInvalidHandle);
  CHECK(inside.find("8 bytes into the block") != std::string::npos);
  CHECK(inside.find("start address") != std::string::npos);
}

TEST_CASE("zero size, zero address, double free and never-issued addresses are refused") {
  HostBlocks blocks;
  CHECK(refusal([&] { blocks.allocate(0); }, Status::kInvalidArgument).find("size is 0") !=
        std::string::npos);
  CHECK(refusal([&] { blocks.find(0, "address_a"); }, Status::kInvalidArgument)
            .find("address_a is 0") != std::string::npos);
  auto address = blocks.allocate(16)->address();
  blocks.free(address, "address");
  CHECK(blocks.live_count() == 0);
  CHECK(refusal([&] { blocks.free(address, "address"); }, Status::kInvalidHandle)
            .find("already freed") != std::string::npos);
  CHECK(refusal([&] { blocks.find(0x1000, "address"); }, Status::kInvalidHandle)
            .find("never returned") != std::string::npos);
  for (std::uint64_t size : {~std::uint64_t{0}, std::uint64_t{1} << 63}) {
    CHECK(refusal([&] { blocks.allocate(size); }, Status::kOutOfMemory)
              .find("cannot be allocated") != std::string::npos);
  }
  CHECK(blocks.live_count() == 0);
}

TEST_CASE("a block freed while a user holds it stays allocated until the user lets go") {
  HostBlocks blocks;
  auto block = blocks.allocate(64);
  std::memset(block->data(), 1, 64);
  blocks.free(block->address(), "address");
  CHECK(block->data()[63] == 1);  // still ours: the shared owner keeps it
}

TEST_CASE("concurrent allocate/write/free from several threads keeps the registry consistent") {
  HostBlocks blocks;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&blocks, t] {
      for (int i = 0; i < 500; ++i) {
        auto block = blocks.allocate(1 + (i * 7 + t) % 300);
        std::memset(block->data(), t, block->size());
        blocks.free(block->address(), "address");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(blocks.live_count() == 0);
}

TEST_CASE("the host matrix product sums with k ascending") {
  // 1e16 + 1 - 1e16 depends on the order: ascending gives (1e16 + 1) - 1e16 = 0 in float64.
  const double a[3] = {1e16, 1.0, -1e16};
  const double b[3] = {1.0, 1.0, 1.0};
  double c = -1.0;
  ops::sim_matmul_host(a, b, &c, 1, 1, 3);
  CHECK(c == 0.0);
  const double a2[6] = {1, 2, 3, 4, 5, 6};       // 2x3
  const double b2[6] = {7, 8, 9, 10, 11, 12};    // 3x2
  double c2[4] = {};
  ops::sim_matmul_host(a2, b2, c2, 2, 2, 3);
  CHECK(c2[0] == 58);
  CHECK(c2[1] == 64);
  CHECK(c2[2] == 139);
  CHECK(c2[3] == 154);
}

TEST_CASE("freed blocks are quarantined: an immediate reallocation gets a new address") {
  aethercl::HostBlocks blocks;
  std::vector<std::uint64_t> freed;
  for (int i = 0; i < 32; ++i) {
    auto block = blocks.allocate(64);
    std::uint64_t address = block->address();
    block.reset();
    blocks.free(address, "address");
    freed.push_back(address);
  }
  for (int i = 0; i < 32; ++i) {
    auto block = blocks.allocate(64);
    CHECK(std::find(freed.begin(), freed.end(), block->address()) == freed.end());
  }
}
