// The submission thread: commands run in order on its thread, drain() waits for all of them, and
// a command that fails to enqueue becomes a deferred error of the device, reported by the next
// synchronising call instead of the call that recorded it.
#include "runtime/device.h"
#include "runtime/device_list.h"
#include "runtime/submitter.h"
#include "support/error.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace aethercl;

namespace {

cl::Mem buffer_of(Device& device, std::size_t bytes) {
  cl_int status = CL_SUCCESS;
  cl::Mem mem(clCreateBuffer(device.context(), CL_MEM_READ_WRITE, bytes, nullptr, &status));
  REQUIRE(status == CL_SUCCESS);
  return mem;
}

// A Device of visible device 0 with the submission thread forced on or off.
std::unique_ptr<Device> device_with_thread(bool on) {
  setenv("AETHERCL_SUBMIT_THREAD", on ? "1" : "0", 1);
  auto device = std::make_unique<Device>(0, visible_devices().front());
  unsetenv("AETHERCL_SUBMIT_THREAD");
  return device;
}

}  // namespace

TEST_CASE("commands recorded for the submission thread run in order") {
  auto device = device_with_thread(true);
  CHECK(device->submission_thread());
  std::lock_guard lock(device->mutex());
  Stream& stream = device->default_stream();
  cl::Mem mem = buffer_of(*device, 4096);
  std::vector<unsigned char> out(4096);
  for (int round = 0; round < 50; ++round) {
    // Fill, then overwrite part of it: only the order makes the result right.
    device->fill(stream, mem.get(), 0, 4096, static_cast<unsigned char>(round));
    device->fill(stream, mem.get(), 100, 200, static_cast<unsigned char>(round + 1));
  }
  device->read(stream, mem.get(), 0, out.size(), out.data());
  CHECK(out[0] == 49);
  CHECK(out[99] == 49);
  CHECK(out[100] == 50);
  CHECK(out[299] == 50);
  CHECK(out[300] == 49);
}

TEST_CASE("an enqueue failure on the submission thread is reported at the next sync point") {
  auto device = device_with_thread(true);
  std::lock_guard lock(device->mutex());
  Stream& stream = device->default_stream();
  // A fill of a NULL buffer passes no validation here: OpenCL refuses it when enqueued.
  CHECK_NOTHROW(device->fill(stream, nullptr, 0, 16, 1));
  try {
    device->synchronize();
    FAIL("the deferred error was not reported");
  } catch (const Error& error) {
    std::string message = error.what();
    CHECK(message.find("memset") != std::string::npos);
    CHECK(message.find("when it was enqueued") != std::string::npos);
  }
  CHECK_NOTHROW(device->synchronize());  // reported once
}

TEST_CASE("without the submission thread an enqueue failure is reported by the call itself") {
  auto device = device_with_thread(false);
  CHECK_FALSE(device->submission_thread());
  std::lock_guard lock(device->mutex());
  CHECK_THROWS_AS(device->fill(device->default_stream(), nullptr, 0, 16, 1), Error);
  CHECK_NOTHROW(device->synchronize());
}

TEST_CASE("a full ring makes the producer wait, and drain returns after the last command") {
  std::vector<std::string> errors;
  Submitter submitter([&](const Command&, const Error& error) { errors.push_back(error.what()); },
                      4);
  Device& device = testing::test_device();
  cl::Mem mem = buffer_of(device, 64);
  cl_int status = CL_SUCCESS;
  cl::Queue queue(clCreateCommandQueue(device.context(), device.info().id, 0, &status));
  REQUIRE(status == CL_SUCCESS);
  for (int i = 0; i < 100; ++i) {
    Command command;
    command.kind = Command::Kind::kFill;
    command.queue = queue.get();
    command.mem = mem.get();
    command.size = 64;
    command.pattern = static_cast<unsigned char>(i);
    submitter.push(std::move(command));
  }
  submitter.drain();
  CHECK(submitter.idle());
  CHECK(submitter.commands_executed() == 100);
  unsigned char out[64] = {};
  REQUIRE(clEnqueueReadBuffer(queue.get(), mem.get(), CL_TRUE, 0, 64, out, 0, nullptr, nullptr) ==
          CL_SUCCESS);
  CHECK(out[0] == 99);
  CHECK(errors.empty());
}
