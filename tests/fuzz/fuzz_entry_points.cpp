// Fuzz harness: an input is a program of entry-point calls with arguments drawn from it (buffer
// handles live, freed, NULL or made up; dimensions from interesting values; hostile sizes and
// offsets; simulated_* addresses; programs, kernels and launches: fuzz_runtime.h). Each result is checked against the C ABI's contract (exactly 0
// or 1, a last error naming the function on failure, none on success); after the program every
// buffer is freed, none may be left, and a round trip must still compute correctly.
//
// With clang and -DAETHERCL_FUZZ=ON this is a libFuzzer target. Otherwise (g++ sanitizer build)
// main() below replays corpus files and then runs random programs for --seconds.
#include <aethercl/driver.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kMaxBuffer = 1 << 20;  // every accepted transfer fits in the scratch
std::vector<unsigned char> scratch(2 * kMaxBuffer + 4096, 0x5A);
unsigned long long calls = 0, refused = 0;

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint32_t u32() {
    std::uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value = (value << 8) | byte();
    return value;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

const long long kDims[] = {0, 1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 31, 32, 33, 53, 63, 64, 65, 255,
                           256, 257, 1024, 4096, 65535, 65536, 65537, 46341, 1 << 20, 1 << 21,
                           1 << 22, INT_MAX, INT_MAX - 1, -1, -2, INT_MIN, INT_MIN + 1};
const unsigned long long kSizes[] = {0, 1, 3, 4, 8, 16, 64, 100, 212, 256, 1000, 1024, 4096,
                                     65536, 65537, kMaxBuffer, kMaxBuffer + 1, 1ull << 32,
                                     1ull << 62, 1ull << 63, ~0ull, ~0ull - 3};
const float kFloats[] = {0.0f, 1e-5f, 1e-8f, 0.5f, 0.9f, 0.999f, 1.0f, -1.0f, 3e-4f, 1e30f,
                         -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, 2.0f};

int dim(Input& in) {
  std::uint8_t b = in.byte();
  if (b < 176) return b % 24;  // small values mostly: calls that pass validation and run
  return static_cast<int>(kDims[b % std::size(kDims)]);
}
unsigned long long size_arg(Input& in) {
  std::uint8_t b = in.byte();
  if (b < 128) return b * 4ull;
  return kSizes[b % std::size(kSizes)];
}
float float_arg(Input& in) { return kFloats[in.byte() % std::size(kFloats)]; }
int gpu_arg(Input& in) {
  std::uint8_t b = in.byte();
  if (b < 232) return 0;
  const int values[] = {1, 7, -1, INT_MIN, INT_MAX, 2, 3, 100};
  return values[b % 8];
}

struct State {
  std::vector<void*> live, freed;
  std::vector<unsigned long long> blocks, freed_blocks;
  std::vector<void*> streams, dead_streams, events, dead_events, pinned, freed_pinned;
  std::vector<unsigned long long> pinned_sizes;  // bytes of pinned[i]
  std::vector<void*> comms, dead_comms;
  bool initialized = true;

  // A stream argument: NULL (the default stream), live, destroyed, made up or another type.
  void* stream(Input& in) {
    std::uint8_t b = in.byte();
    switch (b % 8) {
      case 0: case 1: return nullptr;
      case 2: return dead_streams.empty() ? nullptr : dead_streams[b % dead_streams.size()];
      case 3: return reinterpret_cast<void*>((static_cast<std::uintptr_t>(in.u32()) << 8) | 0xA5);
      case 4: return handle(in);
      default: return streams.empty() ? nullptr : streams[b % streams.size()];
    }
  }
  void* event(Input& in) {
    std::uint8_t b = in.byte();
    switch (b % 6) {
      case 0: return nullptr;
      case 1: return dead_events.empty() ? nullptr : dead_events[b % dead_events.size()];
      case 2: return stream(in);
      default: return events.empty() ? nullptr : events[b % events.size()];
    }
  }
  // Host memory for an asynchronous transfer of size bytes: pinned (live, large enough),
  // ordinary, or NULL.
  void* host_memory(Input& in, unsigned long long size) {
    std::uint8_t b = in.byte();
    if (b % 16 == 0) return nullptr;
    if (b % 2 == 0 && !pinned.empty() && pinned_sizes[b % pinned.size()] >= size) {
      return pinned[b % pinned.size()];
    }
    return scratch.data();
  }
  void forget_pinned(void* pointer) {
    auto it = std::find(pinned.begin(), pinned.end(), pointer);
    if (it == pinned.end()) return;
    pinned_sizes.erase(pinned_sizes.begin() + (it - pinned.begin()));
    pinned.erase(it);
    freed_pinned.push_back(pointer);
  }

  // A communicator token: live, destroyed, made up, a buffer handle or NULL.
  void* comm(Input& in) {
    std::uint8_t b = in.byte();
    switch (b % 6) {
      case 0: return nullptr;
      case 1: return reinterpret_cast<void*>((static_cast<std::uintptr_t>(in.u32()) << 8) | 0xC0);
      case 2: return dead_comms.empty() ? nullptr : dead_comms[b % dead_comms.size()];
      case 3: return live.empty() ? nullptr : live[b % live.size()];
      default: return comms.empty() ? nullptr : comms[b % comms.size()];
    }
  }

  void* handle(Input& in) {
    std::uint8_t b = in.byte();
    switch (b % 10) {
      case 0: return nullptr;
      case 1: return reinterpret_cast<void*>((static_cast<std::uintptr_t>(in.u32()) << 8) | 0xAE);
      case 2: return freed.empty() ? nullptr : freed[b % freed.size()];
      case 3: return scratch.data() + (b & 0x3f);  // a real host pointer, not a token
      default: return live.empty() ? nullptr : live[b % live.size()];
    }
  }
  unsigned long long address(Input& in) {
    std::uint8_t b = in.byte();
    switch (b % 8) {
      case 0: return 0;
      case 1: return 0x7f0000000000ull + in.u32();
      case 2: return freed_blocks.empty() ? 0 : freed_blocks[b % freed_blocks.size()];
      case 3: return live.empty() ? 1 : reinterpret_cast<std::uintptr_t>(live[b % live.size()]);
      case 4: return blocks.empty() ? 0 : blocks[b % blocks.size()] + 8;
      default: return blocks.empty() ? 0 : blocks[b % blocks.size()];
    }
  }
  const void* host(Input& in) { return in.byte() % 16 == 0 ? nullptr : scratch.data(); }
};

[[noreturn]] void violation(const char* function, const std::string& what) {
  std::fprintf(stderr, "CONTRACT VIOLATION in %s: %s (last error: '%s', code %d)\n", function,
               what.c_str(), aethercl_last_error(), aethercl_last_error_code());
  std::abort();
}

bool starts_with(const char* text, const char* prefix) {
  return std::strncmp(text, prefix, std::strlen(prefix)) == 0;
}

// Accepted calls per function, printed by the standalone driver (how deep the fuzzer gets).
std::map<std::string, unsigned long long> accepted;

// int entry points: exactly 0 or 1; 0 comes with a message naming the function, 1 with none.
void check_status(const char* function, int result) {
  ++calls;
  if (result == 1) ++accepted[function];
  if (result != 0 && result != 1) violation(function, "returned " + std::to_string(result));
  const char* message = aethercl_last_error();
  if (result == 0) {
    ++refused;
    if (!starts_with(message, function) || message[std::strlen(function)] != ':')
      violation(function, "failure without a message naming the function");
    if (aethercl_last_error_code() == AETHERCL_OK) violation(function, "failure with code 0");
    if (aethercl_last_error_code() == AETHERCL_INTERNAL) violation(function, "internal error");
  } else if (message[0] != '\0' || aethercl_last_error_code() != AETHERCL_OK) {
    violation(function, "success with an error message");
  }
}

void check_pointer(const char* function, bool null) { check_status(function, null ? 0 : 1); }

void check_void(const char* function) {
  ++calls;
  const char* message = aethercl_last_error();
  if (message[0] != '\0' && (!starts_with(message, function) ||
                             message[std::strlen(function)] != ':'))
    violation(function, "message does not name the function");
  if (aethercl_last_error_code() == AETHERCL_INTERNAL) violation(function, "internal error");
}

// aethercl_gemm with a descriptor drawn from the input (mostly consistent and small, sometimes
// hostile in one field or several), aethercl_gemm_fused with it and an epilogue likewise drawn,
// and aethercl_set_matmul_precision.
void gemm_step(State& s, Input& in, std::uint8_t op, int gpu, void* const* h, const int* d,
               const float* f) {
  if (op % 3 == 2) {
    check_status("aethercl_set_matmul_precision",
                 aethercl_set_matmul_precision(gpu, static_cast<int>(in.byte() % 8) - 1));
    return;
  }
  aethercl_gemm_desc desc{};
  const std::uint8_t shape = in.byte();
  desc.struct_size = shape % 16 == 0 ? (shape % 32 == 0 ? 8 : sizeof(desc) - 4) : sizeof(desc);
  desc.trans_a = shape % 23 == 0 ? 2 : (shape >> 1) % 2;
  desc.trans_b = shape % 29 == 0 ? -1 : (shape >> 2) % 2;
  desc.m = d[0];
  desc.n = d[1];
  desc.k = d[2];
  desc.batch = in.byte() % 4 == 0 ? d[3] : 1 + in.byte() % 3;
  const long long a_rows = desc.trans_a ? desc.k : desc.m, a_cols = desc.trans_a ? desc.m : desc.k;
  const long long b_rows = desc.trans_b ? desc.n : desc.k, b_cols = desc.trans_b ? desc.k : desc.n;
  auto ld = [&](long long cols) {
    const std::uint8_t b = in.byte();
    return b % 8 == 0 ? dim(in) : static_cast<int>(std::clamp(cols, 1LL, 1LL << 30) + b % 3);
  };
  desc.lda = ld(a_cols);
  desc.ldb = ld(b_cols);
  desc.ldc = ld(desc.n);
  auto stride = [&](long long rows, int leading) -> long long {
    const std::uint8_t b = in.byte();
    if (b % 8 == 0) return static_cast<long long>(dim(in)) * (b % 16 == 0 ? 1 : 4096);
    return b % 3 == 0 ? 0 : rows * leading;
  };
  desc.stride_a = stride(a_rows, desc.lda);
  desc.stride_b = stride(b_rows, desc.ldb);
  desc.stride_c = stride(desc.m, desc.ldc);
  desc.alpha = f[0];
  desc.beta = in.byte() % 2 ? 0.0f : f[1];
  desc.a = h[0];
  desc.b = h[1];
  desc.c = in.byte() % 8 == 0 ? h[0] : h[2];  // sometimes C is A's buffer
  const std::uint8_t offsets = in.byte();
  desc.offset_a = offsets % 4 == 0 ? size_arg(in) : offsets % 5;
  desc.offset_b = offsets % 8 == 1 ? size_arg(in) : offsets % 3;
  desc.offset_c = offsets % 16 == 2 ? size_arg(in) : offsets % 7;
  const std::uint8_t types = in.byte();
  desc.dtype_a = types % 16 == 0 ? static_cast<int>(in.byte() % 10) - 1 : types % 3;
  desc.dtype_b = types % 32 == 1 ? (desc.dtype_a + 1) % 3 : desc.dtype_a;
  desc.dtype_c = (types >> 2) % 3;
  desc.compute = types % 8 == 3 ? static_cast<int>(in.byte() % 9) - 2 : (types >> 4) % 6;
  void* stream = in.byte() % 4 == 0 ? s.stream(in) : nullptr;
  if (op % 6 == 1) {  // the same descriptor with an epilogue (aethercl_gemm_fused)
    aethercl_gemm_epilogue epilogue{};
    const std::uint8_t form = in.byte();
    epilogue.struct_size = form % 32 == 0 ? sizeof(epilogue) - 1 : sizeof(epilogue);
    epilogue.kind = form % 16 == 1 ? static_cast<int>(in.u32()) : form % 9;  // 0 and 8 refused
    const std::uint8_t slots = in.byte();
    epilogue.bias = slots % 4 == 0 ? nullptr : (slots % 4 == 1 ? desc.c : h[3]);
    epilogue.offset_bias = slots % 16 == 2 ? size_arg(in) : slots % 3;
    epilogue.dtype_bias = slots % 32 == 3 ? static_cast<int>(in.byte() % 10) - 1 : (slots >> 2) % 3;
    const std::uint8_t pre = in.byte();
    epilogue.pre = pre % 3 == 0 ? nullptr : (pre % 8 == 1 ? h[0] : h[4]);  // sometimes A's buffer
    epilogue.offset_pre = pre % 16 == 2 ? size_arg(in) : pre % 5;
    const std::uint8_t residual = in.byte();  // sometimes C's or pre's buffer
    epilogue.residual = residual % 2 == 0 ? nullptr : (residual % 8 == 1 ? desc.c : h[residual % 5]);
    epilogue.offset_residual = residual % 16 == 3 ? size_arg(in) : residual % 7;
    check_status("aethercl_gemm_fused",
                 aethercl_gemm_fused(gpu, in.byte() % 32 == 0 ? nullptr : &desc,
                                     in.byte() % 16 == 0 ? nullptr : &epilogue, stream));
    return;
  }
  check_status("aethercl_gemm", aethercl_gemm(gpu, in.byte() % 32 == 0 ? nullptr : &desc, stream));
}

#include "fuzz_graphs.inc"

// The runtime functions of ABI version 3 (streams, events, host memory, transfers).
void runtime_step(State& s, Input& in, std::uint8_t op, int gpu) {
  switch (op % 18) {
    case 0: {
      void* stream = aethercl_stream_create(gpu, in.byte() % 8 == 0 ? in.u32() : in.byte() % 2);
      check_pointer("aethercl_stream_create", stream == nullptr);
      if (stream) s.streams.push_back(stream);
      break;
    }
    case 1: {
      void* stream = s.stream(in);
      int result = aethercl_stream_destroy(gpu, stream);
      check_status("aethercl_stream_destroy", result);
      auto it = std::find(s.streams.begin(), s.streams.end(), stream);
      if (result == 1 && it != s.streams.end()) {
        s.dead_streams.push_back(stream);
        s.streams.erase(it);
      }
      break;
    }
    case 2: check_status("aethercl_stream_set_current", aethercl_stream_set_current(gpu, s.stream(in))); break;
    case 3: {
      void* current = aethercl_stream_current(gpu);
      check_pointer("aethercl_stream_current", current == nullptr && aethercl_last_error()[0] != '\0');
      break;
    }
    case 4: check_status("aethercl_stream_synchronize", aethercl_stream_synchronize(gpu, s.stream(in))); break;
    case 5: {
      void* event = aethercl_event_record(gpu, s.stream(in));
      check_pointer("aethercl_event_record", event == nullptr);
      if (event) s.events.push_back(event);
      break;
    }
    case 6: check_status("aethercl_stream_wait_event", aethercl_stream_wait_event(gpu, s.stream(in), s.event(in))); break;
    case 7: {
      int done = 0;
      check_status("aethercl_event_query", aethercl_event_query(s.event(in), in.byte() % 8 ? &done : nullptr));
      break;
    }
    case 8: check_status("aethercl_event_synchronize", aethercl_event_synchronize(s.event(in))); break;
    case 9: {
      float ms = 0;
      check_status("aethercl_event_elapsed_ms", aethercl_event_elapsed_ms(s.event(in), s.event(in), in.byte() % 8 ? &ms : nullptr));
      break;
    }
    case 10: {
      void* event = s.event(in);
      int result = aethercl_event_destroy(event);
      check_status("aethercl_event_destroy", result);
      auto it = std::find(s.events.begin(), s.events.end(), event);
      if (result == 1 && it != s.events.end()) {
        s.dead_events.push_back(event);
        s.events.erase(it);
      }
      break;
    }
    case 11: {
      auto size = size_arg(in);
      if (size > kMaxBuffer && size < (1ull << 62)) size = kMaxBuffer;
      void* pointer = aethercl_host_alloc(gpu, size);
      check_pointer("aethercl_host_alloc", pointer == nullptr);
      if (pointer) {
        s.pinned.push_back(pointer);
        s.pinned_sizes.push_back(size);
      }
      break;
    }
    case 12: {
      std::uint8_t b = in.byte();
      void* pointer = b % 4 == 0 ? nullptr
                      : b % 4 == 1 ? (s.freed_pinned.empty() ? scratch.data() : s.freed_pinned[b % s.freed_pinned.size()])
                      : b % 4 == 2 ? static_cast<void*>(scratch.data() + 8)
                                   : (s.pinned.empty() ? nullptr : s.pinned[b % s.pinned.size()]);
      int result = aethercl_host_free(pointer);
      check_status("aethercl_host_free", result);
      if (result == 1) s.forget_pinned(pointer);
      break;
    }
    case 13: case 14: {
      auto offset = size_arg(in), size = size_arg(in);
      void* host = s.host_memory(in, size);
      if (op % 18 == 13) {
        check_status("aethercl_write_async", aethercl_write_async(gpu, s.handle(in), offset, size, host, s.stream(in)));
      } else {
        check_status("aethercl_read_async", aethercl_read_async(gpu, s.handle(in), offset, size, host, s.stream(in)));
      }
      break;
    }
    case 15: {
      auto dst_offset = size_arg(in), src_offset = size_arg(in), size = size_arg(in);
      check_status("aethercl_copy", aethercl_copy(gpu, s.handle(in), dst_offset, s.handle(in), src_offset, size, s.stream(in)));
      break;
    }
    case 16: {
      auto offset = size_arg(in), size = size_arg(in);
      check_status("aethercl_memset", aethercl_memset(gpu, s.handle(in), offset, size, dim(in), s.stream(in)));
      break;
    }
    default: check_status("aethercl_synchronize", aethercl_synchronize(gpu)); break;
  }
}
#include "fuzz_train_ops.inc"

// Many devices (one device here: communicators of it, bad tokens, collectives, peer copies).
void many_device_step(State& s, Input& in, int gpu, void* const* h, int n_raw) {
  void* comm = s.comm(in);
  void* const* buffers = in.byte() % 16 ? h : nullptr;
  void* const* others = in.byte() % 16 ? h + 2 : nullptr;
  unsigned long long count = size_arg(in) / 4;
  int dtype = static_cast<int>(in.byte() % 10) - 1;
  int which = static_cast<int>(in.byte() % 6) - 1;  // op or root
  switch (in.byte() % 8) {
    case 6: {
      if (which == 4) {
        // Across processes: one rank at most (nranks 2 would wait for a peer that never comes).
        static unsigned char id[AETHERCL_COMM_ID_BYTES + 8];
        std::uint8_t b = in.byte();
        std::size_t id_size = b % 4 == 0 ? size_arg(in) : AETHERCL_COMM_ID_BYTES + b % 8 - 1;
        if (b % 2 == 0) {
          check_status("aethercl_comm_unique_id",
                       aethercl_comm_unique_id(b % 16 == 0 ? nullptr : id,
                                               std::min<std::size_t>(id_size, sizeof(id))));
          break;
        }
        if (b % 8 == 3) id[b % sizeof(id)] ^= in.byte();  // a damaged id
        void* made = aethercl_comm_create_rank(n_raw % 3 - 1, static_cast<int>(count % 3) - 1,
                                               b % 16 == 1 ? nullptr : id,
                                               std::min<std::size_t>(id_size, sizeof(id)),
                                               b % 32 == 5 ? gpu_arg(in) : gpu);
        check_pointer("aethercl_comm_create_rank", made == nullptr);
        if (made) s.comms.push_back(made);
        break;
      }
      void* made = aethercl_comm_alloc(comm, which, size_arg(in));
      check_pointer("aethercl_comm_alloc", made == nullptr);
      if (made) free_gpu_memory(gpu, made);
      break;
    }
    case 0: {
      int indices[4] = {gpu, gpu_arg(in), gpu_arg(in), gpu_arg(in)};
      void* created = aethercl_comm_create(n_raw % 6 - 1, in.byte() % 16 ? indices : nullptr);
      check_pointer("aethercl_comm_create", created == nullptr);
      if (created) s.comms.push_back(created);
      break;
    }
    case 1: {
      int result = aethercl_comm_destroy(comm);
      check_status("aethercl_comm_destroy", result);
      auto it = std::find(s.comms.begin(), s.comms.end(), comm);
      if (result == 1 && it != s.comms.end()) {
        s.dead_comms.push_back(comm);
        s.comms.erase(it);
      }
      break;
    }
    case 2: check_status("aethercl_all_reduce", aethercl_all_reduce(comm, buffers, count, dtype, which)); break;
    case 3: check_status("aethercl_broadcast", aethercl_broadcast(comm, buffers, count, dtype, which)); break;
    case 4: check_status("aethercl_all_gather", aethercl_all_gather(comm, buffers, others, count, dtype)); break;
    case 5: check_status("aethercl_reduce_scatter", aethercl_reduce_scatter(comm, buffers, others, count, dtype, which)); break;
    default: check_status("aethercl_copy_peer", aethercl_copy_peer(gpu, h[0], size_arg(in), gpu_arg(in), h[1], size_arg(in), size_arg(in))); break;
  }
}
}  // namespace

#include "fuzz_runtime.h"

namespace {

RuntimeState runtime_state;  // programs and kernels of the running input

void step(State& s, Input& in) {
  const std::uint8_t op = in.byte();
  const int gpu = gpu_arg(in);
  void* h[5];
  for (auto& x : h) x = s.handle(in);
  int d[4];
  for (auto& x : d) x = dim(in);
  float f[5];
  for (auto& x : f) x = float_arg(in);
  if (op >= 250) {  // the general GEMM and the matmul precision (version 3)
    gemm_step(s, in, op, gpu, h, d, f);
    return;
  }
  if (op >= 220) {  // the runtime functions of version 3; below, the mapping older corpora use
    runtime_step(s, in, op, gpu);
    return;
  }
  if (op >= 228) {  // your own kernels, typed memory, the kernel log, interop (fuzz_runtime.h)
    step_runtime(runtime_state, s, in, gpu, h, d);
    return;
  }
  if (op >= 216 && op < 220) {  // --- graphs (AETHERCL_4): fuzz_graphs.inc ---
    graph_step(s, in, gpu);
    return;
  }
  if (op >= 200) {  // many devices: communicators, collectives, peer copies
    many_device_step(s, in, gpu, h, d[0]);
    return;
  }
  switch (op % 45) {
    case 0: case 1: case 2: case 3: {
      unsigned long long size = size_arg(in);
      if (size > kMaxBuffer && size < (1ull << 62)) size = kMaxBuffer;  // transfers use scratch
      void* handle = allocate_gpu_memory(gpu, size);
      check_pointer("allocate_gpu_memory", handle == nullptr);
      if (handle) s.live.push_back(handle);
      break;
    }
    case 4: case 5: {
      if (s.live.empty()) break;
      std::size_t index = in.byte() % s.live.size();
      free_gpu_memory(gpu, s.live[index]);
      check_void("free_gpu_memory");
      // A free through an index that resolves to no device leaves the buffer live.
      if (aethercl_last_error()[0] == '\0') {
        s.freed.push_back(s.live[index]);
        s.live.erase(s.live.begin() + static_cast<long>(index));
      }
      break;
    }
    case 6: free_gpu_memory(gpu, h[0]); check_void("free_gpu_memory");
      if (aethercl_last_error()[0] == '\0' && h[0] != nullptr) {
        auto it = std::find(s.live.begin(), s.live.end(), h[0]);
        if (it != s.live.end()) { s.freed.push_back(*it); s.live.erase(it); }
      }
      break;
    case 7: case 8: {
      auto offset = size_arg(in), size = size_arg(in);
      check_status("write_host_to_gpu_blocking",
                   write_host_to_gpu_blocking(gpu, h[0], offset, size, s.host(in)));
      break;
    }
    case 9: case 10: {
      auto offset = size_arg(in), size = size_arg(in);
      void* dst = in.byte() % 16 == 0 ? nullptr : scratch.data();
      check_status("read_gpu_to_host_blocking",
                   read_gpu_to_host_blocking(gpu, h[0], offset, size, dst));
      break;
    }
    case 11: check_status("execute_clone_on_gpu", execute_clone_on_gpu(gpu, h[0], h[1], size_arg(in))); break;
    case 12: check_status("execute_matmul_on_gpu", execute_matmul_on_gpu(gpu, h[0], h[1], h[2], d[0], d[1], d[2], d[3])); break;
    case 13: check_status("execute_matmul_backward_on_gpu", execute_matmul_backward_on_gpu(gpu, h[0], h[1], h[2], h[3], h[4], d[0], d[1], d[2], d[3])); break;
    case 14: check_status("execute_add_on_gpu", execute_add_on_gpu(gpu, h[0], h[1], h[2], d[0])); break;
    case 15: check_status("execute_mul_on_gpu", execute_mul_on_gpu(gpu, h[0], h[1], h[2], d[0])); break;
    case 16: check_status("execute_mul_backward_on_gpu", execute_mul_backward_on_gpu(gpu, h[0], h[1], h[2], h[3], h[4], d[0])); break;
    case 17: check_status("execute_gelu_on_gpu", execute_gelu_on_gpu(gpu, h[0], h[1], d[0])); break;
    case 18: check_status("execute_gelu_backward_on_gpu", execute_gelu_backward_on_gpu(gpu, h[0], h[1], h[2], d[0])); break;
    case 19: check_status("execute_layernorm_on_gpu", execute_layernorm_on_gpu(gpu, h[0], h[1], d[0], d[1], f[0])); break;
    case 20: check_status("execute_layernorm_backward_on_gpu", execute_layernorm_backward_on_gpu(gpu, h[0], h[1], h[2], d[0], d[1], f[0])); break;
    case 21: check_status("execute_softmax_on_gpu", execute_softmax_on_gpu(gpu, h[0], h[1], d[0], d[1])); break;
    case 22: check_status("execute_softmax_backward_on_gpu", execute_softmax_backward_on_gpu(gpu, h[0], h[1], h[2], d[0], d[1])); break;
    case 23: check_status("execute_transpose_on_gpu", execute_transpose_on_gpu(gpu, h[0], h[1], d[0], d[1])); break;
    case 24: check_status("execute_transpose_backward_on_gpu", execute_transpose_backward_on_gpu(gpu, h[0], h[1], d[0], d[1])); break;
    case 25: check_status("execute_adam_update_on_gpu", execute_adam_update_on_gpu(gpu, h[0], h[1], h[2], h[3], d[0], d[1] % 5 - 1, f[0], f[1], f[2], f[3], f[4])); break;
    case 26: check_status("execute_matmul_batched_on_gpu", execute_matmul_batched_on_gpu(gpu, h[0], h[1], h[2], d[0], d[1], d[2], d[3])); break;
    case 27: check_status("execute_matmul_batched_backward_on_gpu", execute_matmul_batched_backward_on_gpu(gpu, h[0], h[1], h[2], h[3], h[4], d[0], d[1], d[2], d[3])); break;
    case 28: check_status("execute_transpose_batched_gpu", execute_transpose_batched_gpu(gpu, h[0], h[1], d[0], d[1], d[2])); break;
    case 29: check_status("execute_transpose_12_batched_gpu", execute_transpose_12_batched_gpu(gpu, h[0], h[1], d[0], d[1], d[2], d[3])); break;
    case 30: check_status("execute_reduce_sum_gpu", execute_reduce_sum_gpu(gpu, h[0], h[1], d[0], d[1], d[2])); break;
    case 31: check_status("execute_add_broadcast_pe_gpu", execute_add_broadcast_pe_gpu(gpu, h[0], h[1], h[2], d[0], d[1], d[2])); break;
    case 32: check_status("execute_embedding_lookup_gpu", execute_embedding_lookup_gpu(gpu, h[0], h[1], h[2], d[0], d[1], d[2], d[3])); break;
    case 33: check_status("execute_embedding_backward_gpu", execute_embedding_backward_gpu(gpu, h[0], h[1], h[2], d[0], d[1], d[2], d[3])); break;
    case 34: check_status("execute_log_softmax_stable_gpu", execute_log_softmax_stable_gpu(gpu, h[0], h[1], d[0], d[1], d[2])); break;
    case 35: check_status("execute_cross_entropy_loss_grad_gpu", execute_cross_entropy_loss_grad_gpu(gpu, h[0], h[1], h[2], h[3], d[0], d[1], d[2])); break;
    case 36: check_status("execute_broadcast_add_gpu", execute_broadcast_add_gpu(gpu, h[0], h[1], h[2], d[0], d[1], d[2])); break;
    case 37: {
      auto size = size_arg(in);
      if (size > kMaxBuffer && size < (1ull << 62)) size = kMaxBuffer;  // transfers use scratch
      unsigned long long address = simulated_kernel_allocate(gpu, size);
      check_void("simulated_kernel_allocate");
      if (address != 0) s.blocks.push_back(address);
      break;
    }
    case 38: {
      unsigned long long address = s.address(in);
      simulated_kernel_free(gpu, address, size_arg(in));
      check_void("simulated_kernel_free");
      auto it = std::find(s.blocks.begin(), s.blocks.end(), address);
      if (it != s.blocks.end() && aethercl_last_error()[0] == '\0') {
        s.freed_blocks.push_back(address);
        s.blocks.erase(it);
      }
      break;
    }
    case 39: simulated_kernel_write(gpu, s.address(in), size_arg(in), s.host(in)); check_void("simulated_kernel_write"); break;
    case 40: simulated_kernel_read(gpu, s.address(in), size_arg(in), in.byte() % 16 ? scratch.data() : nullptr); check_void("simulated_kernel_read"); break;
    case 41: {
      int shape_a[2] = {d[0], d[1]}, shape_b[2] = {d[1], d[2]};
      if (in.byte() % 4 == 0) shape_b[0] = d[3];
      unsigned long long result = simulated_matrix_multiply(
          gpu, s.address(in), s.address(in), size_arg(in), size_arg(in),
          in.byte() % 16 ? shape_a : nullptr, in.byte() % 16 ? shape_b : nullptr);
      check_pointer("simulated_matrix_multiply", result == 0);
      if (result != 0) s.blocks.push_back(result);
      break;
    }
    case 42: {
      char text[512];
      switch (in.byte() % 7) {
        case 0: check_pointer("aethercl_memory_stats", aethercl_memory_stats(gpu, text, in.byte() % 2 ? sizeof text : in.byte() % 8) == 0); break;
        case 1: check_pointer("aethercl_device_info", aethercl_device_info(gpu, in.byte() % 2 ? text : nullptr, sizeof text) == 0); break;
        case 2: check_status("aethercl_synchronize", aethercl_synchronize(gpu)); break;
        case 3: std::memcpy(text, scratch.data(), 80); text[in.byte() % 80] = '\0';
          check_status("aethercl_set_buffer_label", aethercl_set_buffer_label(gpu, h[0], in.byte() % 8 ? text : nullptr)); break;
        case 4: check_status("aethercl_empty_cache", aethercl_empty_cache(gpu)); break;
        case 5: check_status("aethercl_reset_peak_memory_stats", aethercl_reset_peak_memory_stats(gpu)); break;
        default: if (aethercl_status_name(d[0]) == nullptr) violation("aethercl_status_name", "NULL"); break;
      }
      break;
    }
    case 43:
      if (in.byte() % 8 == 0) {  // rarely: shutdown (every handle dies), then re-initialise
        shutdown_driver();
        check_void("shutdown_driver");
        s.freed.insert(s.freed.end(), s.live.begin(), s.live.end());
        s.live.clear();
        s.dead_comms.insert(s.dead_comms.end(), s.comms.begin(), s.comms.end());
        s.comms.clear();
        s.dead_streams.insert(s.dead_streams.end(), s.streams.begin(), s.streams.end());
        s.streams.clear();
        s.dead_events.insert(s.dead_events.end(), s.events.begin(), s.events.end());
        s.events.clear();
        s.freed_pinned.insert(s.freed_pinned.end(), s.pinned.begin(), s.pinned.end());
        s.pinned.clear();
        s.pinned_sizes.clear();
        for (auto* list : {&runtime_state.programs, &runtime_state.kernels}) {
          runtime_state.dead.insert(runtime_state.dead.end(), list->begin(), list->end());
          list->clear();
        }
        s.initialized = false;
      }
      if (in.byte() % 2 == 0) {
        check_status("initialize_gpu", initialize_gpu(0));
        s.initialized = true;
      }
      break;
    case 44: train_step(in, gpu, h, d, f); break;
  }
}

void round_trip() {
  const int n = 29;
  float a[n], b[n], c[n];
  for (int i = 0; i < n; ++i) a[i] = static_cast<float>(i), b[i] = 0.25f, c[i] = -1.0f;
  void* h[3];
  for (auto& x : h) x = allocate_gpu_memory(0, sizeof a);
  if (!h[0] || !h[1] || !h[2]) violation("allocate_gpu_memory", "round trip allocation failed");
  if (write_host_to_gpu_blocking(0, h[0], 0, sizeof a, a) != 1 ||
      write_host_to_gpu_blocking(0, h[1], 0, sizeof b, b) != 1 ||
      execute_add_on_gpu(0, h[0], h[1], h[2], n) != 1 ||
      read_gpu_to_host_blocking(0, h[2], 0, sizeof c, c) != 1)
    violation("round trip", "a call failed");
  for (int i = 0; i < n; ++i)
    if (c[i] != a[i] + b[i]) violation("execute_add_on_gpu", "wrong round-trip result");
  for (auto x : h) free_gpu_memory(0, x);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static bool started = [] {
    if (initialize_gpu(0) != 1) violation("initialize_gpu", "no device");
    return true;
  }();
  (void)started;
  State state;
  Input in(data, size);
  for (int steps = 0; !in.done() && steps < 64; ++steps) step(state, in);
  if (!state.initialized && initialize_gpu(0) != 1) violation("initialize_gpu", "re-init failed");
  graph_state.finish(state);  // --- graphs (AETHERCL_4) ---
  for (void* event : state.events) aethercl_event_destroy(event);
  for (void* stream : state.streams) aethercl_stream_destroy(0, stream);
  for (void* pointer : state.pinned) aethercl_host_free(pointer);
  aethercl_stream_set_current(0, nullptr);
  for (void* handle : state.live) free_gpu_memory(0, handle);
  for (void* comm : state.comms) {
    if (aethercl_comm_destroy(comm) != 1) violation("aethercl_comm_destroy", "a live communicator");
  }
  for (unsigned long long address : state.blocks) simulated_kernel_free(0, address, 0);
  runtime_state.destroy_all();
  runtime_state.dead.clear();
  char stats[8192];
  if (aethercl_memory_stats(0, stats, sizeof stats) == 0 ||
      std::strstr(stats, "\"live_buffers\": 0,") == nullptr ||
      std::strstr(stats, "\"user_programs\": 0, \"user_kernels\": 0,") == nullptr)
    violation("aethercl_memory_stats", std::string("objects left after freeing all: ") + stats);
  round_trip();
  return 0;
}

#ifndef AETHERCL_LIBFUZZER
// Standalone driver: fuzz_entry_points [--seconds=N] [--seed=N] [--save=FILE] [corpus files/dirs]
int main(int argc, char** argv) {
  double seconds = 10;
  unsigned long long seed = std::random_device{}();
  std::string save = "fuzz-current-input.bin";
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--seconds=", 0) == 0) seconds = std::atof(arg.c_str() + 10);
    else if (arg.rfind("--seed=", 0) == 0) seed = std::strtoull(arg.c_str() + 7, nullptr, 10);
    else if (arg.rfind("--save=", 0) == 0) save = arg.substr(7);
    else if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg))
        if (entry.is_regular_file()) inputs.push_back(entry.path());
    } else inputs.emplace_back(arg);
  }
  std::sort(inputs.begin(), inputs.end());
  for (const auto& path : inputs) {
    std::ifstream file(path, std::ios::binary);
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(file)), {});
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("replayed %zu corpus inputs; random programs for %.0f s with seed %llu\n",
              inputs.size(), seconds, seed);
  std::fflush(stdout);
  std::mt19937_64 rng(seed);
  auto start = std::chrono::steady_clock::now();
  unsigned long long programs = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {
    std::vector<std::uint8_t> bytes(rng() % 700);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    {  // kept on disk while it runs: after a crash it is the reproducer
      std::ofstream file(save, std::ios::binary | std::ios::trunc);
      file.write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    ++programs;
  }
  std::filesystem::remove(save);
  std::printf("%llu random programs, %llu calls (%llu refused), no contract violation\n",
              programs, calls, refused);
  for (const auto& [function, count] : accepted) std::printf("  %s: %llu accepted\n", function.c_str(), count);
  return 0;
}
#endif
