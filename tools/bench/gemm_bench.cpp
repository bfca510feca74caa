// SGEMM throughput of execute_matmul_on_gpu (loaded with dlopen) next to CLBlast on the same
// device, in the same process. Prints one JSON line per size.
// Usage: bench_gemm LIBRARY GPU_INDEX REPS SIZE... (SIZE is N for N^3 or MxNxK)
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <aethercl/driver.h>
#include <clblast_c.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Driver {
  int (*initialize)(int);
  void* (*allocate)(int, size_t);
  int (*write)(int, void*, size_t, size_t, const void*);
  int (*matmul)(int, void*, void*, void*, int, int, int, int);
  int (*synchronize)(int);
  size_t (*device_info)(int, char*, size_t);
  void (*release)(int, void*);
  const char* (*last_error)();
};

template <typename T>
void bind(void* lib, const char* name, T& fn) {
  fn = reinterpret_cast<T>(dlsym(lib, name));
  if (!fn) {
    std::fprintf(stderr, "missing symbol %s\n", name);
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string json_field(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\": \"");
  if (at == std::string::npos) return {};
  at += key.size() + 5;
  return json.substr(at, json.find('"', at) - at);
}

// The OpenCL device whose name matches, for CLBlast's own context and queue.
cl_device_id find_device(const std::string& name) {
  cl_uint count = 0;
  clGetPlatformIDs(0, nullptr, &count);
  std::vector<cl_platform_id> platforms(count);
  clGetPlatformIDs(count, platforms.data(), nullptr);
  for (cl_platform_id platform : platforms) {
    cl_uint n = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(n);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, devices.data(), nullptr);
    for (cl_device_id device : devices) {
      char buffer[256] = {};
      clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof(buffer) - 1, buffer, nullptr);
      std::string device_name = buffer;
      while (!device_name.empty() && device_name.back() == ' ') device_name.pop_back();
      if (device_name == name) return device;
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s LIBRARY GPU_INDEX REPS SIZE...\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  Driver d{};
  bind(lib, "initialize_gpu", d.initialize);
  bind(lib, "allocate_gpu_memory", d.allocate);
  bind(lib, "write_host_to_gpu_blocking", d.write);
  bind(lib, "execute_matmul_on_gpu", d.matmul);
  bind(lib, "aethercl_synchronize", d.synchronize);
  bind(lib, "aethercl_device_info", d.device_info);
  bind(lib, "free_gpu_memory", d.release);
  bind(lib, "aethercl_last_error", d.last_error);
  int gpu = std::atoi(argv[2]);
  int reps = std::atoi(argv[3]);
  if (d.initialize(gpu) != 1) {
    std::fprintf(stderr, "initialize_gpu: %s\n", d.last_error());
    return 1;
  }
  std::string info(d.device_info(gpu, nullptr, 0) + 1, '\0');
  d.device_info(gpu, info.data(), info.size());
  std::string device_name = json_field(info, "name");
  cl_device_id device = find_device(device_name);
  cl_int status = CL_SUCCESS;
  cl_context context = device ? clCreateContext(nullptr, 1, &device, nullptr, nullptr, &status) : nullptr;
  cl_command_queue queue = context ? clCreateCommandQueue(context, device, 0, &status) : nullptr;

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int arg = 4; arg < argc; ++arg) {
    int m = 0, n = 0, k = 0;
    if (std::sscanf(argv[arg], "%dx%dx%d", &m, &n, &k) != 3) m = n = k = std::atoi(argv[arg]);
    std::vector<float> a(size_t(m) * k), b(size_t(k) * n);
    for (auto& x : a) x = dist(rng);
    for (auto& x : b) x = dist(rng);
    double flops = 2.0 * m * n * k;

    void* da = d.allocate(gpu, a.size() * 4);
    void* db = d.allocate(gpu, b.size() * 4);
    void* dc = d.allocate(gpu, size_t(m) * n * 4);
    d.write(gpu, da, 0, a.size() * 4, a.data());
    d.write(gpu, db, 0, b.size() * 4, b.data());
    std::vector<double> ours;
    bool ok = d.matmul(gpu, da, db, dc, 1, m, n, k) == 1 && d.synchronize(gpu) == 1;  // warm-up
    for (int r = 0; ok && r < reps; ++r) {
      auto start = Clock::now();
      ok = d.matmul(gpu, da, db, dc, 1, m, n, k) == 1 && d.synchronize(gpu) == 1;
      ours.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    if (!ok) std::fprintf(stderr, "execute_matmul_on_gpu: %s\n", d.last_error());
    d.release(gpu, da);
    d.release(gpu, db);
    d.release(gpu, dc);

    double clblast_seconds = 0;
    if (queue) {
      cl_mem ca = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, a.size() * 4, a.data(), &status);
      cl_mem cb = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, b.size() * 4, b.data(), &status);
      cl_mem cc = clCreateBuffer(context, CL_MEM_READ_WRITE, size_t(m) * n * 4, nullptr, &status);
      auto sgemm = [&] {
        return CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k,
                            1.0f, ca, 0, k, cb, 0, n, 0.0f, cc, 0, n, &queue, nullptr);
      };
      std::vector<double> theirs;
      bool clblast_ok = sgemm() == CLBlastSuccess && clFinish(queue) == CL_SUCCESS;
      for (int r = 0; clblast_ok && r < reps; ++r) {
        auto start = Clock::now();
        clblast_ok = sgemm() == CLBlastSuccess && clFinish(queue) == CL_SUCCESS;
        theirs.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
      if (clblast_ok) clblast_seconds = median(theirs);
      clReleaseMemObject(ca);
      clReleaseMemObject(cb);
      clReleaseMemObject(cc);
    }
    double our_seconds = ok ? median(ours) : 0;
    std::printf("{\"device\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"ours_gflops\": %.2f, "
                "\"clblast_gflops\": %.2f}\n",
                device_name.c_str(), m, n, k, our_seconds ? flops / our_seconds / 1e9 : 0.0,
                clblast_seconds ? flops / clblast_seconds / 1e9 : 0.0);
    std::fflush(stdout);
  }
  if (queue) clReleaseCommandQueue(queue);
  if (context) clReleaseContext(context);
  return 0;
}
