// A token of another device is refused by DeviceCall and survives a free on the wrong device.
// Needs only one OpenCL device: the foreign record is registered by hand for device index 1.
#include "ops/memory_ops.h"
#include "runtime/device_call.h"
#include "runtime/runtime.h"

#include <doctest/doctest.h>

#include <string>

using namespace aethercl;

TEST_CASE("a token of another device is refused and a free on the wrong device keeps it") {
  Runtime& runtime = Runtime::instance();
  runtime.initialize(0);
  void* foreign = runtime.buffers().insert(BufferRecord{1, {}, 64, "theirs"});
  {
    DeviceCall call(0);
    try {
      call.buffer(foreign, "buffer_a", 4);
      FAIL("a foreign token was accepted");
    } catch (const Error& error) {
      CHECK(error.status() == Status::kInvalidHandle);
      std::string message = error.what();
      CHECK(message.find("buffer_a") != std::string::npos);
      CHECK(message.find("belongs to device 1") != std::string::npos);
      CHECK(message.find("runs on device 0") != std::string::npos);
    }
    CHECK_THROWS_AS(call.optional_buffer(foreign, "buffer_da", 4), Error);
    CHECK_THROWS_AS(ops::free_buffer(call, foreign), Error);
    CHECK_THROWS_AS(ops::write(call, foreign, 0, 4, "abcd"), Error);
  }
  CHECK(runtime.buffers().find(foreign));  // the wrong-device free did not release it
  CHECK(runtime.buffers().remove(foreign));
  runtime.shutdown();
}
