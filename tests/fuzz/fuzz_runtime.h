// Fuzz steps for the version-3 runtime functions (programs, kernels, aethercl_launch, dtypes,
// conversions, the kernel log, interop). Included by fuzz_entry_points.cpp after its helpers;
// programs and kernels made here are destroyed at the end of every input.
//
// Safety of accepted calls: the fuzz kernels touch only byte 0 of their buffer (every buffer has
// one) and local byte 0; accepted launches have small global sizes (huge ones come only in
// combinations the driver must refuse); IL and binary sizes never exceed the scratch buffer, and
// binaries are passed from its start, where a copy from aethercl_program_binary (checked by its
// envelope) is the only well-formed content that can appear.
#pragma once

namespace {

const char* const kFuzzSources[] = {
    "__kernel void fz(__global uchar* o, uchar v, __local uchar* l) {\n"
    "  if (get_local_id(0) == 0) l[0] = v;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  if (get_global_id(0) == 0 && get_global_id(1) == 0 && get_global_id(2) == 0) o[0] = l[0];\n"
    "}\n"
    "__kernel void fz2(__global uchar* o, __global const uchar* i) {\n"
    "  if (get_global_id(0) == 0) o[0] = i[0];\n"
    "}\n",
    "__kernel void broken( { }",
    "",
    "__kernel void fz(__global uchar* o, uchar v, __local uchar* l) { o[0] = v; }",
};
const char* const kFuzzOptions[] = {nullptr, "", "-DX=1", "-cl-fast-relaxed-math", "-bogus-flag",
                                    "-cl-std=CL1.2 -cl-kernel-arg-info"};
const char* const kFuzzNames[] = {"fz", "fz2", "nope", "", nullptr};
const std::size_t kFuzzGlobals[] = {0, 1, 1, 2, 3, 4, 7, 8, 16, 64};

struct RuntimeState {
  std::vector<void*> programs, kernels, dead;  // dead: destroyed program and kernel tokens

  void* program(Input& in) {
    std::uint8_t b = in.byte();
    switch (b % 8) {
      case 0: return nullptr;
      case 1: return reinterpret_cast<void*>((static_cast<std::uintptr_t>(in.u32()) << 8) | 0xB1);
      case 2: return dead.empty() ? nullptr : dead[b % dead.size()];
      case 3: return kernels.empty() ? nullptr : kernels[b % kernels.size()];  // wrong type
      default: return programs.empty() ? nullptr : programs[b % programs.size()];
    }
  }
  void* kernel(Input& in) {
    std::uint8_t b = in.byte();
    switch (b % 8) {
      case 0: return nullptr;
      case 1: return reinterpret_cast<void*>((static_cast<std::uintptr_t>(in.u32()) << 8) | 0xB2);
      case 2: return dead.empty() ? nullptr : dead[b % dead.size()];
      case 3: return programs.empty() ? nullptr : programs[b % programs.size()];  // wrong type
      default: return kernels.empty() ? nullptr : kernels[b % kernels.size()];
    }
  }
  void forget(std::vector<void*>& list, void* token) {
    auto it = std::find(list.begin(), list.end(), token);
    if (it != list.end()) {
      dead.push_back(*it);
      list.erase(it);
    }
  }
  void destroy_all() {
    for (void* kernel : kernels) aethercl_kernel_destroy(kernel);
    for (void* program : programs) aethercl_program_destroy(program);
    kernels.clear();
    programs.clear();
  }
};

std::size_t fuzz_global(Input& in) {
  std::uint8_t b = in.byte();
  if (b < 248) return kFuzzGlobals[b % std::size(kFuzzGlobals)];
  // huge: any launch with one of these and no 0 component must be refused
  return b % 2 ? ~std::size_t{0} : std::size_t{1} << 63;
}

std::size_t bounded_size(Input& in) {
  auto size = size_arg(in);
  return size > scratch.size() ? scratch.size() : static_cast<std::size_t>(size);
}

// Byte order is fixed (no two reads in one argument list), so corpus files mean the same under
// every compiler.
void step_runtime(RuntimeState& r, State& s, Input& in, int gpu, void* const* h, const int* d) {
  switch (in.byte() % 12) {
    case 0: case 1: {
      const char* source = kFuzzSources[in.byte() % std::size(kFuzzSources)];
      const char* options = kFuzzOptions[in.byte() % std::size(kFuzzOptions)];
      if (in.byte() % 16 == 0) source = nullptr;
      void* program = aethercl_program_create(gpu, source, options);
      check_pointer("aethercl_program_create", program == nullptr);
      if (program) r.programs.push_back(program);
      break;
    }
    case 2: {
      if (in.byte() % 2) {  // a SPIR-V header (refused or rejected: it declares nothing)
        const unsigned char magic[4] = {0x03, 0x02, 0x23, 0x07};
        std::memcpy(scratch.data(), magic, 4);
      }
      const void* il = in.byte() % 16 ? scratch.data() : nullptr;
      std::size_t size = bounded_size(in);
      void* program = aethercl_program_create_il(gpu, il, size, nullptr);
      check_pointer("aethercl_program_create_il", program == nullptr);
      if (program) r.programs.push_back(program);
      break;
    }
    case 3: {
      const void* binary = in.byte() % 16 ? scratch.data() : nullptr;
      std::size_t size = bounded_size(in);
      void* program = aethercl_program_create_binary(gpu, binary, size, nullptr);
      check_pointer("aethercl_program_create_binary", program == nullptr);
      if (program) r.programs.push_back(program);
      break;
    }
    case 4: {
      void* out = in.byte() % 4 ? scratch.data() : nullptr;
      void* program = r.program(in);
      std::size_t capacity = bounded_size(in);
      std::size_t size = aethercl_program_binary(program, out, capacity);
      check_pointer("aethercl_program_binary", size == 0);
      break;
    }
    case 5: {
      void* program = r.program(in);
      check_status("aethercl_program_destroy", aethercl_program_destroy(program));
      if (aethercl_last_error()[0] == '\0') r.forget(r.programs, program);
      break;
    }
    case 6: {
      void* program = r.program(in);
      const char* name = kFuzzNames[in.byte() % std::size(kFuzzNames)];
      void* kernel = aethercl_kernel_create(program, name);
      check_pointer("aethercl_kernel_create", kernel == nullptr);
      if (kernel) r.kernels.push_back(kernel);
      break;
    }
    case 7: {
      char text[256];
      void* kernel_token = r.kernel(in);
      char* buffer = in.byte() % 2 ? text : nullptr;
      std::size_t capacity = in.byte() % 2 ? sizeof text : in.byte() % 4;
      std::size_t size = aethercl_kernel_info(kernel_token, buffer, capacity);
      check_pointer("aethercl_kernel_info", size == 0);
      if (in.byte() % 4 == 0) {
        void* kernel = r.kernel(in);
        check_status("aethercl_kernel_destroy", aethercl_kernel_destroy(kernel));
        if (aethercl_last_error()[0] == '\0') r.forget(r.kernels, kernel);
      }
      break;
    }
    case 8: case 9: {
      bool make_kernel = in.byte() % 2 == 1;
      if (make_kernel && r.kernels.empty()) {  // random inputs rarely build both in order
        void* program = aethercl_program_create(gpu, kFuzzSources[0], nullptr);
        check_pointer("aethercl_program_create", program == nullptr);
        if (program) {
          r.programs.push_back(program);
          void* kernel = aethercl_kernel_create(program, "fz");
          check_pointer("aethercl_kernel_create", kernel == nullptr);
          if (kernel) r.kernels.push_back(kernel);
        }
      }
      std::size_t global[3] = {fuzz_global(in), fuzz_global(in), fuzz_global(in)};
      std::size_t local[3] = {fuzz_global(in), fuzz_global(in), fuzz_global(in)};
      unsigned char value = in.byte();
      aethercl_arg args[4];
      for (auto& arg : args) {
        std::uint8_t b = in.byte();
        arg.kind = b % 16 == 15 ? d[0] : b % 3;
        arg.size = b % 8 == 7 ? static_cast<std::size_t>(size_arg(in)) : (b % 2 ? 1 : 4);
        if (arg.kind == AETHERCL_ARG_SCALAR && arg.size > 8) arg.size = 8;  // the bytes at &value
        arg.value = arg.kind == AETHERCL_ARG_SCALAR ? (b % 32 ? &value : nullptr) : h[b % 5];
      }
      // scalars read at most 8 bytes from a uint64 holding value
      unsigned long long wide = value;
      for (auto& arg : args)
        if (arg.kind == AETHERCL_ARG_SCALAR && arg.value) arg.value = &wide;
      int work_dim = d[1];
      if (in.byte() % 8 != 0) work_dim = 1 + in.byte() % 3;
      int num_args = d[2];
      if (in.byte() % 8 != 0) num_args = 2 + in.byte() % 2;
      if (in.byte() % 2) {  // arguments that fit fz (buffer, uchar, local), so launches run
        args[0] = {AETHERCL_ARG_BUFFER, 0, h[0]};
        args[1] = {AETHERCL_ARG_SCALAR, 1, &wide};
        args[2] = {AETHERCL_ARG_LOCAL, static_cast<std::size_t>(1 + in.byte() % 64), nullptr};
        num_args = 3;
        for (auto& size : local) size = 1;
      }
      void* stream = in.byte() % 4 == 0 ? s.stream(in) : nullptr;
      void* kernel = r.kernel(in);
      const std::size_t* global_size = in.byte() % 16 ? global : nullptr;
      const std::size_t* local_size = in.byte() % 2 ? local : nullptr;
      const aethercl_arg* arg_array = in.byte() % 16 ? args : nullptr;
      check_status("aethercl_launch", aethercl_launch(gpu, kernel, stream, work_dim, global_size,
                                                      local_size, num_args, arg_array));
      break;
    }
    case 10: {
      std::uint8_t b = in.byte();
      if (b % 2) {
        check_status("aethercl_buffer_set_dtype", aethercl_buffer_set_dtype(gpu, h[0], d[0] % 10 - 1));
      } else {
        unsigned long long count = size_arg(in) / (b % 4 + 1);
        void* stream = b % 16 == 0 ? s.stream(in) : nullptr;
        check_status("aethercl_convert",
                     aethercl_convert(gpu, h[0], d[0] % 10 - 1, h[1], d[1] % 10 - 1, count, stream));
      }
      break;
    }
    default: {
      char text[512];
      std::uint8_t which = in.byte();
      std::uint8_t b = in.byte();
      switch (which % 4) {
        case 0: check_pointer("aethercl_kernel_log", aethercl_kernel_log(gpu, b % 2 ? text : nullptr, b % 4 < 2 ? sizeof text : b % 8) == 0); break;
        case 1: check_pointer("aethercl_cl_context", aethercl_cl_context(gpu) == nullptr); break;
        case 2: {
          void* stream = b % 4 ? nullptr : s.stream(in);
          check_pointer("aethercl_cl_queue", aethercl_cl_queue(gpu, stream) == nullptr);
          break;
        }
        default: check_pointer("aethercl_cl_mem", aethercl_cl_mem(gpu, h[0]) == nullptr); break;
      }
      break;
    }
  }
}

}  // namespace
