// Environment parsing: strict booleans, sizes with units, counts and lists; malformed values are
// reported once per variable and fall back to the default.
#include "support/env.h"
#include "support/log.h"
#include "test_support.h"

#include <doctest/doctest.h>

using namespace aethercl;

using aethercl::testing::ScopedEnv;

TEST_CASE("sizes: plain bytes, binary units in any spelling, fractions only with a unit") {
  CHECK(env::parse_bytes("4096") == 4096u);
  CHECK(env::parse_bytes("512M") == 512ull << 20);
  CHECK(env::parse_bytes("512m") == 512ull << 20);
  CHECK(env::parse_bytes(" 2 GiB ") == 2ull << 30);
  CHECK(env::parse_bytes("64KB") == 64ull << 10);
  CHECK(env::parse_bytes("1.5G") == 3ull << 29);
  CHECK(env::parse_bytes("0.5k") == 512u);
  CHECK(env::parse_bytes("1T") == 1ull << 40);
  CHECK(env::parse_bytes("0") == 0u);
  for (const char* bad : {"", "G", "1.5", "1.2.3G", ".5G", "5.G", "-1", "1e9", "12 apples",
                          "1X", "16777216T", "1GiBs", "0x10"}) {
    CAPTURE(bad);
    CHECK(!env::parse_bytes(bad).has_value());
  }
}

TEST_CASE("flags and counts are strict") {
  CHECK(env::parse_flag("YES") == true);
  CHECK(env::parse_flag(" off ") == false);
  CHECK(env::parse_flag("True") == true);
  CHECK(!env::parse_flag("2").has_value());
  CHECK(!env::parse_flag("enable").has_value());
  CHECK(env::parse_count("7") == 7u);
  CHECK(!env::parse_count("7K").has_value());
  CHECK(!env::parse_count("-3").has_value());
  CHECK(!env::parse_count("").has_value());
}

TEST_CASE("log levels in any case, with the common aliases") {
  CHECK(parse_log_level("DEBUG") == spdlog::level::debug);
  CHECK(parse_log_level("Warning") == spdlog::level::warn);
  CHECK(parse_log_level("err") == spdlog::level::err);
  CHECK(parse_log_level(" off") == spdlog::level::off);
  CHECK(!parse_log_level("verbose").has_value());
  CHECK(!parse_log_level("").has_value());
}

TEST_CASE("a malformed value falls back and is reported once, naming the variable") {
  const char* name = "AETHERCL_UNIT_TEST_SIZE";
  {
    ScopedEnv set(name, "1.5G");
    CHECK(env::bytes(name) == 3ull << 29);
    CHECK(!env::was_reported(name));
  }
  {
    ScopedEnv set(name, "lots");
    CHECK(!env::bytes(name).has_value());
    CHECK(env::was_reported(name));
    CHECK(!env::claim_report(name));  // already reported: later readers stay quiet
  }
  {
    ScopedEnv set("AETHERCL_UNIT_TEST_LIMIT", "0");
    CHECK(!env::bytes("AETHERCL_UNIT_TEST_LIMIT", 1).has_value());  // below the minimum
    CHECK(env::was_reported("AETHERCL_UNIT_TEST_LIMIT"));
  }
  {
    ScopedEnv set("AETHERCL_UNIT_TEST_FLAG", "maybe");
    CHECK(env::flag("AETHERCL_UNIT_TEST_FLAG", true));
    CHECK(!env::flag("AETHERCL_UNIT_TEST_FLAG", false));
    CHECK(env::was_reported("AETHERCL_UNIT_TEST_FLAG"));
  }
  {
    ScopedEnv set("AETHERCL_UNIT_TEST_COUNT", "9");
    CHECK(!env::count("AETHERCL_UNIT_TEST_COUNT", 1, 8).has_value());
    CHECK(env::was_reported("AETHERCL_UNIT_TEST_COUNT"));
  }
  {
    ScopedEnv set("AETHERCL_UNIT_TEST_LIST", " a, b ,,c");
    CHECK(env::list("AETHERCL_UNIT_TEST_LIST") == std::vector<std::string>{"a", "b", "c"});
    CHECK(env::was_reported("AETHERCL_UNIT_TEST_LIST"));
  }
  CHECK(!env::bytes("AETHERCL_UNIT_TEST_UNSET").has_value());
  CHECK(!env::was_reported("AETHERCL_UNIT_TEST_UNSET"));
}
