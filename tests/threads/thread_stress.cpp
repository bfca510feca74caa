// Eight threads drive the C ABI of driver.so at once (allocate, write, add/mul/gelu, clone, one
// shared user kernel token launched by all of them, conversions, programs made and destroyed,
// read, free, labels, statistics, the kernel log, refused calls), each checking its own results
// and its own last error.
// Built against the shared library so it can run under ThreadSanitizer (AETHERCL_SANITIZE=thread).
#include <aethercl/driver.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 8;
std::atomic<int> failures{0};
void* scale_kernel = nullptr;  // one kernel token shared by every thread
const char* kScaleSource =
    "__kernel void scale(__global float* x, float factor, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n) x[i] *= factor;\n"
    "}\n";

void report(int thread, int iteration, const std::string& what) {
  if (failures.fetch_add(1) < 20) {
    std::fprintf(stderr, "thread %d, iteration %d: %s (last error: %s)\n", thread, iteration,
                 what.c_str(), aethercl_last_error());
  }
}

void worker(int thread, int iterations) {
  std::mt19937 rng(1234u + static_cast<unsigned>(thread));
  std::uniform_int_distribution<int> size_of(1, 5000);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  for (int it = 0; it < iterations; ++it) {
    const int n = size_of(rng);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    std::vector<float> a(n), b(n), out(n);
    for (int i = 0; i < n; ++i) a[i] = value(rng), b[i] = value(rng);
    void* ha = allocate_gpu_memory(0, bytes);
    void* hb = allocate_gpu_memory(0, bytes);
    void* hc = allocate_gpu_memory(0, bytes);
    void* hd = allocate_gpu_memory(0, bytes);
    if (!ha || !hb || !hc || !hd) {
      report(thread, it, "allocation failed");
      continue;
    }
    aethercl_set_buffer_label(0, hc, ("thread" + std::to_string(thread)).c_str());
    bool ok = write_host_to_gpu_blocking(0, ha, 0, bytes, a.data()) == 1 &&
              write_host_to_gpu_blocking(0, hb, 0, bytes, b.data()) == 1;
    const int op = it % 3;
    if (op == 0) ok = ok && execute_add_on_gpu(0, ha, hb, hc, n) == 1;
    if (op == 1) ok = ok && execute_mul_on_gpu(0, ha, hb, hc, n) == 1;
    if (op == 2) ok = ok && execute_gelu_on_gpu(0, ha, hc, n) == 1;
    ok = ok && execute_clone_on_gpu(0, hc, hd, bytes) == 1;
    // the shared kernel token, with this thread's own buffer and factor (a power of two: exact)
    float factor = static_cast<float>(1 << (thread % 3));
    unsigned int count = static_cast<unsigned int>(n);
    aethercl_arg args[3] = {{AETHERCL_ARG_BUFFER, 0, hd},
                            {AETHERCL_ARG_SCALAR, sizeof factor, &factor},
                            {AETHERCL_ARG_SCALAR, sizeof count, &count}};
    size_t global = static_cast<size_t>(n);
    ok = ok && aethercl_launch(0, scale_kernel, nullptr, 1, &global, nullptr, 3, args) == 1;
    // a round trip through bf16 and back must keep values that bf16 holds exactly (0.5 and 1)
    if (it % 5 == 0) {
      void* half = allocate_gpu_memory(0, 2);
      void* back = allocate_gpu_memory(0, 4);
      float one = 0.5f, result = 0.0f;
      void* source = allocate_gpu_memory(0, 4);
      bool converted = half && back && source &&
                       write_host_to_gpu_blocking(0, source, 0, 4, &one) == 1 &&
                       aethercl_convert(0, source, AETHERCL_F32, half, AETHERCL_BF16, 1, nullptr) == 1 &&
                       aethercl_convert(0, half, AETHERCL_BF16, back, AETHERCL_F32, 1, nullptr) == 1 &&
                       read_gpu_to_host_blocking(0, back, 0, 4, &result) == 1 && result == 0.5f;
      if (!converted) report(thread, it, "bf16 round trip");
      free_gpu_memory(0, half);
      free_gpu_memory(0, back);
      free_gpu_memory(0, source);
    }
    // programs and kernels made and destroyed while other threads launch
    if (it % 9 == 0) {
      void* program = aethercl_program_create(0, kScaleSource, nullptr);
      void* kernel = program ? aethercl_kernel_create(program, "scale") : nullptr;
      char info[512];
      if (!kernel || aethercl_kernel_info(kernel, info, sizeof info) == 0 ||
          aethercl_program_destroy(program) != 1 || aethercl_kernel_destroy(kernel) != 1)
        report(thread, it, "program/kernel life cycle");
      if (aethercl_kernel_log(0, nullptr, 0) == 0) report(thread, it, "kernel log");
    }
    ok = ok && read_gpu_to_host_blocking(0, hd, 0, bytes, out.data()) == 1;
    if (!ok) report(thread, it, "a call failed");
    for (int i = 0; ok && i < n; ++i) {
      float expect = op == 0   ? a[i] + b[i]
                     : op == 1 ? a[i] * b[i]
                               : static_cast<float>(0.5 * a[i] * (1.0 + std::erf(a[i] / std::sqrt(2.0))));
      expect *= factor;
      if (std::fabs(out[i] - expect) > 1e-5f * factor * (1.0f + std::fabs(expect))) {
        report(thread, it, "wrong result at " + std::to_string(i));
        break;
      }
    }
    // A refused call must leave a message in this thread only.
    if (execute_add_on_gpu(0, ha, hb, hc, -thread - 1) != 0 ||
        std::strstr(aethercl_last_error(), "negative") == nullptr ||
        std::strstr(aethercl_last_error(), std::to_string(-thread - 1).c_str()) == nullptr) {
      report(thread, it, "refused call: wrong result or message");
    }
    if (it % 7 == 0) {
      char stats[256];
      if (aethercl_memory_stats(0, stats, sizeof stats) == 0) report(thread, it, "stats failed");
    }
    if (it % 11 == 5) {  // the pool's cache released and its peak restarted under other threads
      if (aethercl_empty_cache(0) != 1) report(thread, it, "empty_cache failed");
      if (aethercl_reset_peak_memory_stats(0) != 1) report(thread, it, "reset_peak failed");
    }
    free_gpu_memory(0, ha);
    free_gpu_memory(0, hb);
    free_gpu_memory(0, hc);
    free_gpu_memory(0, hd);
    free_gpu_memory(0, hd);  // double free: harmless
    if (aethercl_last_error()[0] == '\0') report(thread, it, "double free left no message");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 40;
  if (initialize_gpu(0) != 1) {
    std::fprintf(stderr, "initialize_gpu failed: %s\n", aethercl_last_error());
    return 2;
  }
  void* program = aethercl_program_create(0, kScaleSource, nullptr);
  scale_kernel = program ? aethercl_kernel_create(program, "scale") : nullptr;
  if (!scale_kernel) {
    std::fprintf(stderr, "the shared kernel failed: %s\n", aethercl_last_error());
    return 2;
  }
  aethercl_program_destroy(program);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t, iterations);
  for (auto& thread : threads) thread.join();
  aethercl_kernel_destroy(scale_kernel);
  char stats[4096];
  aethercl_memory_stats(0, stats, sizeof stats);
  const bool no_leak = std::strstr(stats, "\"live_buffers\": 0,") != nullptr;
  if (!no_leak) std::fprintf(stderr, "buffers leaked: %s\n", stats);
  shutdown_driver();
  std::printf("%d threads x %d iterations: %d failures%s\n", kThreads, iterations, failures.load(),
              no_leak ? "" : ", buffers leaked");
  return failures.load() == 0 && no_leak ? 0 : 1;
}
