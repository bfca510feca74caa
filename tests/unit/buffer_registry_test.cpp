// Buffer tokens: issued, validated, never reused; every bad token is classified.
#include "runtime/buffer_registry.h"

#include <doctest/doctest.h>

using namespace aethercl;

TEST_CASE("tokens resolve while live and are refused after removal, never reused") {
  BufferRegistry registry;
  void* first = registry.insert(BufferRecord{0, {}, 100, {}});
  void* second = registry.insert(BufferRecord{1, {}, 200, {}});
  CHECK(first != nullptr);
  CHECK(first != second);
  TokenProblem problem = TokenProblem::kNone;
  auto record = registry.find(first, &problem);
  REQUIRE(record);
  CHECK(record->size == 100);
  CHECK(problem == TokenProblem::kNone);

  CHECK(registry.remove(first));
  CHECK_FALSE(registry.find(first, &problem));
  CHECK(problem == TokenProblem::kReleased);
  CHECK_FALSE(registry.remove(first, &problem));  // double free
  CHECK(problem == TokenProblem::kReleased);

  void* third = registry.insert(BufferRecord{0, {}, 100, {}});
  CHECK(third != first);
  CHECK(registry.live_count(0) == 1);
  CHECK(registry.live_count(1) == 1);
  CHECK(registry.live_bytes(1) == 200);
}

TEST_CASE("NULL, made-up and never-issued tokens are classified") {
  BufferRegistry registry;
  void* token = registry.insert(BufferRecord{0, {}, 8, {}});
  TokenProblem problem = TokenProblem::kNone;
  CHECK_FALSE(registry.find(nullptr, &problem));
  CHECK(problem == TokenProblem::kNull);
  CHECK_FALSE(registry.find(reinterpret_cast<void*>(0x7fff12345678), &problem));
  CHECK(problem == TokenProblem::kMalformed);
  auto raw = reinterpret_cast<std::uintptr_t>(token);
  CHECK_FALSE(registry.find(reinterpret_cast<void*>(raw + (1000 << 8)), &problem));
  CHECK(problem == TokenProblem::kNeverIssued);
  CHECK(std::string(BufferRegistry::describe(TokenProblem::kReleased)).find("freed") !=
        std::string::npos);
}

TEST_CASE("remove_device takes exactly that device's buffers; labels are kept") {
  BufferRegistry registry;
  void* a = registry.insert(BufferRecord{0, {}, 1, {}});
  void* b = registry.insert(BufferRecord{1, {}, 2, {}});
  CHECK(registry.set_label(b, "weights"));
  CHECK_FALSE(registry.set_label(reinterpret_cast<void*>(0x1), "x"));
  auto labelled = registry.labelled(1);
  REQUIRE(labelled.size() == 1);
  CHECK(std::get<2>(labelled[0]) == "weights");
  auto removed = registry.remove_device(0);
  CHECK(removed.size() == 1);
  CHECK_FALSE(registry.find(a));
  CHECK(registry.find(b));
}
