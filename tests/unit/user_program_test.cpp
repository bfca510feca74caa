// Users' own kernels, below the C ABI: typed tokens, parameter kinds and sizes, the binary
// envelope, the kernel log ring, and user programs built on the test device.
#include "runtime/kernel_log.h"
#include "runtime/program/binary_envelope.h"
#include "runtime/program/kernel_arg_types.h"
#include "runtime/program/user_kernel.h"
#include "runtime/token_table.h"
#include "test_support.h"

#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>

using namespace aethercl;

namespace {

std::string refusal(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("program and kernel tokens: wrong type, never issued, destroyed, NULL") {
  TokenTable<int> programs(token_tag::kProgram, "program");
  TokenTable<int> kernels(token_tag::kKernel, "kernel");
  void* program = programs.insert(std::make_shared<int>(7));
  void* kernel = kernels.insert(std::make_shared<int>(8));
  CHECK(*programs.get(program, "program") == 7);
  CHECK(refusal([&] { programs.get(kernel, "program"); }).find("is a kernel, not a program") !=
        std::string::npos);
  CHECK(refusal([&] { programs.get(nullptr, "program"); }) == "program is NULL");
  auto never = reinterpret_cast<void*>((std::uintptr_t{1} << 40 << 8) | token_tag::kProgram);
  CHECK(refusal([&] { programs.get(never, "program"); }).find("never issued") != std::string::npos);
  CHECK(refusal([&] { programs.get(reinterpret_cast<void*>(0x1230), "p"); })
            .find("is not a program handle") != std::string::npos);
  CHECK(*programs.remove(program, "program") == 7);
  CHECK(refusal([&] { programs.remove(program, "program"); }).find("destroyed") !=
        std::string::npos);
  void* again = programs.insert(std::make_shared<int>(9));
  CHECK(again != program);  // ids are never reused
  CHECK(programs.count_if([](int v) { return v == 9; }) == 1);
  CHECK(programs.remove_if([](int v) { return v == 9; }).size() == 1);
}

TEST_CASE("parameter kinds and scalar sizes from OpenCL type names") {
  CHECK(scalar_type_size("float", 64) == 4u);
  CHECK(scalar_type_size("uint4", 64) == 16u);
  CHECK(scalar_type_size("char3", 64) == 4u);  // 3-vectors take the room of 4
  CHECK(scalar_type_size("double16", 64) == 128u);
  CHECK(scalar_type_size("const ulong", 64) == 8u);
  CHECK(scalar_type_size("size_t", 32) == 4u);
  CHECK(scalar_type_size("unsigned int", 64) == 4u);
  CHECK_FALSE(scalar_type_size("my_struct_t", 64));
  CHECK_FALSE(scalar_type_size("float5", 64));
  CHECK(arg_kind_of(CL_KERNEL_ARG_ADDRESS_GLOBAL, "float*") == ArgKind::kBuffer);
  CHECK(arg_kind_of(CL_KERNEL_ARG_ADDRESS_CONSTANT, "int*") == ArgKind::kBuffer);
  CHECK(arg_kind_of(CL_KERNEL_ARG_ADDRESS_LOCAL, "float*") == ArgKind::kLocal);
  CHECK(arg_kind_of(CL_KERNEL_ARG_ADDRESS_PRIVATE, "uint") == ArgKind::kScalar);
  CHECK(arg_kind_of(CL_KERNEL_ARG_ADDRESS_GLOBAL, "image2d_t") == ArgKind::kUnknown);
  CHECK(arg_kind_of(CL_KERNEL_ARG_ADDRESS_PRIVATE, "sampler_t") == ArgKind::kUnknown);
}

TEST_CASE("the binary envelope round-trips and refuses damage and other devices") {
  DeviceInfo info;
  info.name = "device A";
  std::vector<unsigned char> payload{1, 2, 3, 4, 5};
  auto wrapped = wrap_binary(info, payload);
  CHECK(wrapped.size() == kEnvelopeHeaderBytes + payload.size());
  CHECK(is_enveloped(wrapped.data(), wrapped.size()));
  CHECK(unwrap_binary(info, wrapped.data(), wrapped.size()) == payload);
  CHECK(refusal([&] { unwrap_binary(info, wrapped.data(), wrapped.size() - 1); })
            .find("truncated") != std::string::npos);
  auto flipped = wrapped;
  flipped.back() ^= 1;
  CHECK(refusal([&] { unwrap_binary(info, flipped.data(), flipped.size()); }).find("corrupt") !=
        std::string::npos);
  DeviceInfo other = info;
  other.driver_version.assign(1, '2');  // (a string literal here trips GCC 12's -Wrestrict)
  CHECK(refusal([&] { unwrap_binary(other, wrapped.data(), wrapped.size()); })
            .find("another device") != std::string::npos);
  CHECK_FALSE(is_enveloped(payload.data(), payload.size()));
}

TEST_CASE("the kernel log keeps the newest launches, oldest first, and can be off") {
  Kernel kernel;
  kernel.name = "family_op";
  KernelLog log(true);
  CHECK(log.json() == "[]");
  LaunchRecord record;
  record.kernel = &kernel;
  record.entry_point = "execute_add_on_gpu";
  for (std::size_t i = 0; i < KernelLog::kCapacity + 5; ++i) {
    record.geometry = LaunchGeometry::linear(i + 1, 1);
    log.record(record, 0, nullptr);
  }
  std::string json = log.json();
  CHECK(json.find("\"global\": [6]") != std::string::npos);  // the oldest kept
  CHECK(json.find("\"global\": [5]") == std::string::npos);  // overwritten
  CHECK(json.rfind("\"global\": [4101]") > json.find("\"global\": [6]"));
  CHECK(json.find("\"start_ns\": null") != std::string::npos);
  std::size_t entries = 0;
  for (std::size_t at = 0; (at = json.find("\"kernel\": \"family_op\"", at)) != std::string::npos;
       ++at)
    ++entries;
  CHECK(entries == KernelLog::kCapacity);
  KernelLog off(false);
  off.record(record, 0, nullptr);
  CHECK(off.json() == "[]");
}

TEST_CASE("a user program on the test device: kernels, parameters, build failures") {
  Device& device = testing::test_device();
  BuildTarget target{device.index(), device.info(), device.context(), device.disk_cache()};
  auto program = build_from_source(
      target, "__kernel void f(__global float* x, __local int* l, ushort s) { x[0] = s; }",
      "-DUNUSED=1");
  CHECK(program->kernel_names == std::vector<std::string>{"f"});
  CHECK(program->options.find("-cl-kernel-arg-info") != std::string::npos);
  CHECK_FALSE(program->binary.empty());
  auto kernel = create_user_kernel(program, device.info(), "f");
  REQUIRE(kernel->parameters.size() == 3);
  CHECK(kernel->arg_info);
  CHECK(kernel->parameters[0].kind == ArgKind::kBuffer);
  CHECK(kernel->parameters[1].kind == ArgKind::kLocal);
  CHECK(kernel->parameters[2].kind == ArgKind::kScalar);
  CHECK(kernel->parameters[2].size == 2u);
  CHECK(kernel->kernel.max_work_group_size >= 1);
  CHECK(kernel_info_json(*kernel).find("\"num_args\": 3") != std::string::npos);
  CHECK(refusal([&] { create_user_kernel(program, device.info(), "g"); }).find("its kernels: f") !=
        std::string::npos);
  CHECK(refusal([&] { build_from_source(target, "__kernel void f( {", nullptr); })
            .find("failed to build") != std::string::npos);
}
