// A downstream C++17 program of the installed aethercl.hpp: owners, moves, kernel launches with
// buffers, scalars and local memory, streams and events, graphs, GEMM against a float64 reference,
// refusals as exceptions with the library's status and message. Exit 0 only when all holds.
#include <aethercl/aethercl.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "consumer_cpp: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

// Runs call, which must throw aethercl::Error with status and a message containing part.
template <class Call>
void expect_refusal(Call call, aethercl::Status status, const std::string& part, const std::string& what) {
  try {
    call();
    expect(false, what + ": not refused");
  } catch (const aethercl::Error& e) {
    expect(e.status() == status, what + ": status " + e.status_name());
    expect(e.message().find(part) != std::string::npos, what + ": message '" + e.message() + "'");
    expect(std::string(e.what()).find(e.function()) == 0, what + ": what() '" + e.what() + "'");
  }
}

const char* kSource = R"(
__kernel void scale_sum(__global const float* x, __global float* y, float alpha, uint n,
                        __local float* scratch) {
  size_t i = get_global_id(0);
  scratch[get_local_id(0)] = i < n ? alpha * x[i] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (i < n) y[i] = scratch[get_local_id(0)] + 1.0f;
})";

}  // namespace

int main() {
  expect(aethercl::version() == AETHERCL_VERSION_STRING, "version");
  expect(aethercl::abi_version() >= AETHERCL_ABI_VERSION, "ABI version");
  expect(aethercl::Device::count() >= 1, "a device");
  try {
    aethercl::Device dev(0);
    expect(dev.info().find("\"name\"") != std::string::npos, "device info");

    // Own kernel with a buffer, scalars and local memory; guards past the output survive.
    const unsigned n = 203, group = 7;
    std::vector<float> x(n);
    for (unsigned i = 0; i < n; ++i) x[i] = 0.25f * static_cast<float>(i) - 9.0f;
    auto dx = dev.buffer(x);
    std::vector<float> poison(n + 5, NAN);
    for (unsigned i = n; i < n + 5; ++i) poison[i] = 777.0f;
    auto dy = dev.buffer(poison);
    auto kernel = dev.program(kSource).kernel("scale_sum");
    aethercl::Stream stream = dev.stream(true);
    stream.wait(dev.record_event());  // the writes above ran on the default stream
    aethercl::Event start = stream.record();
    kernel.launch(stream, aethercl::NDRange(n), aethercl::NDRange(group), dx, dy, -2.0f, n,
                  aethercl::local<float>(group));
    aethercl::Event end = stream.record();
    end.synchronize();
    expect(end.query() && start.elapsed_ms(end) >= 0.0f, "events");
    std::vector<float> y = dy.read();
    for (unsigned i = 0; i < n; ++i) expect(y[i] == -2.0f * x[i] + 1.0f, "scale_sum element " + std::to_string(i));
    for (unsigned i = n; i < n + 5; ++i) expect(y[i] == 777.0f, "guard element " + std::to_string(i));

    // Moves hand the token over; the moved-from owner releases nothing.
    aethercl::Buffer<float> moved = std::move(dy);
    expect(dy.get() == nullptr && moved.size() == n + 5, "move");

    // GEMM (A transposed, beta != 0) against a float64 product.
    const int m = 13, nn = 11, k = 17;
    std::vector<float> a(k * m), b(k * nn), c0(m * nn);
    for (int i = 0; i < k * m; ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
    for (int i = 0; i < k * nn; ++i) b[i] = std::cos(0.53f * static_cast<float>(i));
    for (int i = 0; i < m * nn; ++i) c0[i] = 0.5f * static_cast<float>(i % 5);
    auto da = dev.buffer(a), db = dev.buffer(b), dc = dev.buffer(c0);
    aethercl::Gemm gemm;
    gemm.m = m, gemm.n = nn, gemm.k = k, gemm.trans_a = true, gemm.alpha = 1.5f, gemm.beta = -1.0f;
    gemm.compute = aethercl::Compute::COMPUTE_FP32;
    gemm.run(dev, da, db, dc);
    std::vector<float> c = dc.read();
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < nn; ++j) {
        double sum = 0, magnitude = 0;
        for (int p = 0; p < k; ++p) {
          sum += static_cast<double>(a[p * m + i]) * b[p * nn + j];
          magnitude += std::fabs(static_cast<double>(a[p * m + i]) * b[p * nn + j]);
        }
        double want = 1.5 * sum - c0[i * nn + j];
        // float32 sum of k products in any order: k * 2^-24 * sum |terms|, plus the roundings of
        // alpha, beta and the result; doubled as a margin.
        double bound = 2.0 * (k + 3) * std::ldexp(1.0, -24) * (1.5 * magnitude + std::fabs(c0[i * nn + j]));
        expect(std::fabs(c[i * nn + j] - want) <= bound, "gemm element " + std::to_string(i * nn + j));
      }
    }

    // A graph: the kernel captured on the stream, replayed on new inputs; a blocking write while
    // capturing throws and is not recorded; a capture whose callable throws is discarded.
    {
      auto gx = dev.alloc<float>(n), gy = dev.alloc<float>(n);
      aethercl::Graph graph = aethercl::Graph::capture(dev, &stream, [&] {
        kernel.launch(stream, aethercl::NDRange(n), aethercl::NDRange(group), gx, gy, 3.0f, n,
                      aethercl::local<float>(group));
      });
      const aethercl::GraphInfo info = graph.info();
      expect(info.device == 0 && info.nodes == 1 && info.kernels == 1 && info.bytes_held >= 0,
             "graph info");
      for (int round = 0; round < 2; ++round) {
        std::vector<float> in(n);
        for (unsigned i = 0; i < n; ++i) in[i] = static_cast<float>(i % 9) - static_cast<float>(round);
        gx.write(in);
        stream.wait(dev.record_event());  // the write ran on the default stream
        graph.launch(&stream);
        stream.synchronize();
        std::vector<float> out = gy.read();
        for (unsigned i = 0; i < n; ++i) {
          expect(out[i] == 3.0f * in[i] + 1.0f, "graph replay element " + std::to_string(i));
        }
      }
      expect_refusal([&] {
        aethercl::Graph::capture(dev, nullptr, [&] { gx.write(std::vector<float>(n)); });
      }, aethercl::Status::InvalidArgument, "captur", "blocking write while capturing");
      gx.write(std::vector<float>(n, 1.0f));  // the refused capture was ended
      expect(gx.read()[0] == 1.0f, "capture ended after a throw");
    }

    // The raw C ABI with a descriptor made by aethercl::descriptor (struct_size set).
    auto desc = aethercl::descriptor<aethercl_gemm_desc>();
    expect(desc.struct_size == sizeof(aethercl_gemm_desc) && desc.a == nullptr, "descriptor");

    // Refusals as exceptions.
    expect_refusal([] { aethercl::Device(100000); }, aethercl::Status::NoDevice, "out of range", "device index");
    expect_refusal([&] { dev.alloc<float>(0); }, aethercl::Status::InvalidArgument, "size is 0", "empty allocation");
    expect_refusal([&] { da.write(std::vector<float>(k * m + 1)); }, aethercl::Status::OutOfRange,
                   "runs past the end", "long write");
    expect_refusal([&] { dev.program("__kernel void f() { nonsense; }"); }, aethercl::Status::BuildFailed,
                   "nonsense", "build failure");
    expect_refusal([&] { dev.program(kSource).kernel("missing"); }, aethercl::Status::InvalidArgument,
                   "its kernels: scale_sum", "missing kernel");
    expect_refusal([&] { kernel.launch(aethercl::NDRange(n), aethercl::NullRange, dx, moved, 2.0, n,
                                       aethercl::local<float>(group)); },
                   aethercl::Status::InvalidArgument, "'alpha'", "double for a float");
    expect_refusal([&] { gemm.m = 14; gemm.run(dev, da, db, dc); }, aethercl::Status::OutOfRange,
                   "desc->", "gemm beyond its buffers");
  } catch (const aethercl::Error& e) {
    std::fprintf(stderr, "consumer_cpp: unexpected %s\n", e.what());
    return 1;
  }
  aethercl::shutdown();
  if (failures != 0) return 1;
  std::printf("consumer_cpp: AetherCL %s through aethercl.hpp: kernels, streams, graphs, GEMM, refusals ok\n",
              aethercl::version().c_str());
  return 0;
}
