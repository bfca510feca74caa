// The per-thread last error: the allocating and the fixed-buffer (forked child) forms, which one
// a reader sees, and truncation of the fixed form.
#include "support/last_error.h"

#include <doctest/doctest.h>

#include <cstring>
#include <string>

using namespace aethercl;

TEST_CASE("the fixed form concatenates its parts and the allocating form replaces it") {
  set_last_error_fixed(Status::kNotInitialized, {"f", ": forked from ", "42", " ok"});
  CHECK(last_error_status() == Status::kNotInitialized);
  CHECK(std::string(last_error_message()) == "f: forked from 42 ok");
  set_last_error(Status::kInvalidArgument, "g: bad size");
  CHECK(std::string(last_error_message()) == "g: bad size");
  set_last_error_fixed(Status::kNotInitialized, {"h"});
  CHECK(std::string(last_error_message()) == "h");
  clear_last_error();
  CHECK(last_error_status() == Status::kOk);
  CHECK(std::string(last_error_message()).empty());
}

TEST_CASE("the fixed form truncates to its buffer and stays terminated") {
  std::string long_part(5000, 'x');
  set_last_error_fixed(Status::kNotInitialized, {"start:", long_part, "end"});
  std::size_t length = std::strlen(last_error_message());
  CHECK(length == 1023);
  CHECK(std::string(last_error_message()).rfind("start:", 0) == 0);
  clear_last_error();
}
