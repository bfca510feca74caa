// AetherCL for C++17, header-only: RAII owners and exceptions over the C ABI of driver.h.
//
// Every owner (Buffer<T>, Program, Kernel, Stream, Event) is move-only and releases its token in
// its destructor; destructors never throw. A refused call throws aethercl::Error carrying the C
// function's name, the status code (aethercl_last_error_code) and the library's message
// (aethercl_last_error). The library validates every token, so an owner destroyed after
// shutdown() releases nothing and harms nothing. Enums and the status table come from
// aethercl_enums.hpp, generated from the C header by tools/gen_abi.py.
//
//   aethercl::Device dev(0);
//   auto kernel = dev.program(source).kernel("add");
//   auto a = dev.buffer(std::vector<float>(1000, 1.0f));
//   kernel.launch(aethercl::NDRange(1000), aethercl::NullRange, a, 1000u);
//   std::vector<float> host = a.read();
#ifndef AETHERCL_HPP
#define AETHERCL_HPP

#include <aethercl/aethercl_enums.hpp>
#include <aethercl/driver.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace aethercl {

// A refused or failed call.
class Error : public std::runtime_error {
 public:
  Error(const char* function, int code, const std::string& message)
      : std::runtime_error(std::string(function) + " failed (" + aethercl_status_name(code) +
                           "): " + message),
        function_(function), code_(code), message_(message) {}
  const char* function() const noexcept { return function_; }
  int code() const noexcept { return code_; }
  Status status() const noexcept { return static_cast<Status>(code_); }
  const char* status_name() const noexcept { return aethercl_status_name(code_); }
  const std::string& message() const noexcept { return message_; }

 private:
  const char* function_;
  int code_;
  std::string message_;
};

namespace detail {

inline Error last_error(const char* function) {
  const char* text = aethercl_last_error();
  return Error(function, aethercl_last_error_code(), text ? text : "");
}

inline void check(const char* function, int result) {
  if (result != 1) throw last_error(function);
}

inline void* check_token(const char* function, void* token) {
  if (token == nullptr) throw last_error(function);
  return token;
}

// The whole text of a function with aethercl_device_info's buffer rules (sized first).
template <class Call>
std::string text_out(const char* function, Call call) {
  std::size_t length = call(nullptr, 0);
  if (length == 0) throw last_error(function);
  std::string text(length + 1, '\0');
  if (call(text.data(), text.size()) == 0) throw last_error(function);
  text.resize(length);
  return text;
}

// The aethercl_dtype code of an element type, -1 where the ABI has none.
template <class T> constexpr int dtype_of() {
  if constexpr (std::is_same_v<T, float>) return AETHERCL_F32;
  else if constexpr (std::is_same_v<T, double>) return AETHERCL_F64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return AETHERCL_I32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return AETHERCL_I64;
  else if constexpr (std::is_same_v<T, std::int8_t>) return AETHERCL_I8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return AETHERCL_U8;
  else return -1;
}

// A move-only owner of one token, released by Release::release(token) in the destructor.
template <class Release>
class Owner {
 public:
  Owner() = default;
  explicit Owner(void* token) noexcept : token_(token) {}
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  Owner(Owner&& other) noexcept : token_(std::exchange(other.token_, nullptr)) {}
  Owner& operator=(Owner&& other) noexcept {
    if (this != &other) {
      reset();
      token_ = std::exchange(other.token_, nullptr);
    }
    return *this;
  }
  ~Owner() { reset(); }
  void* get() const noexcept { return token_; }

 private:
  void reset() noexcept {
    if (token_ != nullptr) Release::release(std::exchange(token_, nullptr));
  }
  void* token_ = nullptr;
};

struct ReleaseProgram { static void release(void* t) noexcept { aethercl_program_destroy(t); } };
struct ReleaseKernel { static void release(void* t) noexcept { aethercl_kernel_destroy(t); } };
struct ReleaseEvent { static void release(void* t) noexcept { aethercl_event_destroy(t); } };
struct ReleaseGraph { static void release(void* t) noexcept { aethercl_graph_destroy(t); } };

// The integer value of "key": in the library's flat JSON objects, -1 when absent.
inline long long json_integer(const std::string& text, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  std::size_t at = text.find(quoted);
  if (at == std::string::npos) return -1;
  at = text.find(':', at + quoted.size());
  if (at == std::string::npos) return -1;
  try {
    return std::stoll(text.substr(at + 1));
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace detail

// A C descriptor struct (aethercl_norm_desc, ...) zeroed, with struct_size set: the ABI's rule.
template <class Desc>
Desc descriptor() noexcept {
  Desc desc{};
  desc.struct_size = sizeof(Desc);
  return desc;
}

inline std::string version() { return aethercl_version(); }
inline int abi_version() noexcept { return aethercl_abi_version(); }
// Waits for all work and releases every device and token (shutdown_driver).
inline void shutdown() noexcept { shutdown_driver(); }

class Event;
class Stream;
class Program;
template <class T> class Buffer;

// An initialised device (initialize_gpu); cheap to copy, lives until shutdown().
class Device {
 public:
  explicit Device(int index = 0) : index_(index) {
    detail::check("initialize_gpu", initialize_gpu(index));
  }
  static int count() noexcept { return aethercl_device_count(); }
  int index() const noexcept { return index_; }
  std::string info() const {
    return detail::text_out("aethercl_device_info", [this](char* b, std::size_t c) {
      return aethercl_device_info(index_, b, c);
    });
  }
  std::string memory_stats() const {
    return detail::text_out("aethercl_memory_stats", [this](char* b, std::size_t c) {
      return aethercl_memory_stats(index_, b, c);
    });
  }
  void synchronize() const { detail::check("aethercl_synchronize", aethercl_synchronize(index_)); }

  template <class T> Buffer<T> alloc(std::size_t count) const;
  template <class T> Buffer<T> buffer(const std::vector<T>& data) const;
  Program program(const std::string& source, const std::string& options = "") const;
  Stream stream(bool timing = false) const;
  // An event at the current end of the default stream (another stream waits for it: Stream::wait).
  Event record_event() const;

 private:
  int index_;
};

// count elements of T in device memory, freed on destruction. Kernels may write a buffer passed
// by const reference: device memory is ordered by the library, not by C++ constness.
template <class T>
class Buffer {
  static_assert(std::is_trivially_copyable_v<T>, "buffers hold plain data");

 public:
  Buffer(Device device, std::size_t count) : device_(device), count_(count) {
    if (count > SIZE_MAX / sizeof(T))
      throw Error("allocate_gpu_memory", AETHERCL_INVALID_ARGUMENT, "size overflows size_t");
    handle_ = detail::check_token("allocate_gpu_memory",
                                  allocate_gpu_memory(device.index(), count * sizeof(T)));
    if constexpr (detail::dtype_of<T>() >= 0) {
      aethercl_buffer_set_dtype(device.index(), handle_, detail::dtype_of<T>());
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept
      : device_(other.device_), count_(other.count_), handle_(std::exchange(other.handle_, nullptr)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      release();
      device_ = other.device_;
      count_ = other.count_;
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ~Buffer() { release(); }

  std::size_t size() const noexcept { return count_; }
  Device device() const noexcept { return device_; }
  void* get() const noexcept { return handle_; }

  // Writes count elements of data at element offset (blocking); the library checks the span.
  void write(const T* data, std::size_t count, std::size_t offset = 0) const {
    detail::check("write_host_to_gpu_blocking",
                  write_host_to_gpu_blocking(device_.index(), handle_, offset * sizeof(T),
                                             count * sizeof(T), data));
  }
  void write(const std::vector<T>& data) const { write(data.data(), data.size()); }
  // Reads count elements at element offset into out, after all earlier work of the device.
  void read(T* out, std::size_t count, std::size_t offset = 0) const {
    detail::check("read_gpu_to_host_blocking",
                  read_gpu_to_host_blocking(device_.index(), handle_, offset * sizeof(T),
                                            count * sizeof(T), out));
  }
  std::vector<T> read() const {
    std::vector<T> out(count_);
    read(out.data(), out.size());
    return out;
  }
  void fill_bytes(unsigned char value) const {
    detail::check("aethercl_memset", aethercl_memset(device_.index(), handle_, 0,
                                                     count_ * sizeof(T), value, nullptr));
  }
  void set_label(const std::string& label) const {
    detail::check("aethercl_set_buffer_label",
                  aethercl_set_buffer_label(device_.index(), handle_, label.c_str()));
  }

 private:
  void release() noexcept {
    if (handle_ != nullptr) free_gpu_memory(device_.index(), std::exchange(handle_, nullptr));
  }
  Device device_;
  std::size_t count_;
  void* handle_ = nullptr;
};

// A point on a stream (aethercl_event_record), destroyed with its owner.
class Event {
 public:
  explicit Event(void* token) noexcept : token_(token) {}
  bool query() const {
    int done = 0;
    detail::check("aethercl_event_query", aethercl_event_query(token_.get(), &done));
    return done != 0;
  }
  void synchronize() const {
    detail::check("aethercl_event_synchronize", aethercl_event_synchronize(token_.get()));
  }
  // Device milliseconds from this event to end (both from timing streams of one device).
  float elapsed_ms(const Event& end) const {
    float ms = 0.0f;
    detail::check("aethercl_event_elapsed_ms",
                  aethercl_event_elapsed_ms(token_.get(), end.token_.get(), &ms));
    return ms;
  }
  void* get() const noexcept { return token_.get(); }

 private:
  detail::Owner<detail::ReleaseEvent> token_;
};

// A stream of one device (aethercl_stream_create); work issued on it still completes after it
// is destroyed.
class Stream {
 public:
  explicit Stream(Device device, bool timing = false)
      : device_(device),
        handle_(detail::check_token("aethercl_stream_create",
                                    aethercl_stream_create(device.index(),
                                                           timing ? AETHERCL_STREAM_TIMING : 0u))) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& other) noexcept
      : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      release();
      device_ = other.device_;
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  ~Stream() { release(); }

  void* get() const noexcept { return handle_; }
  Device device() const noexcept { return device_; }
  void synchronize() const {
    detail::check("aethercl_stream_synchronize",
                  aethercl_stream_synchronize(device_.index(), handle_));
  }
  Event record() const {
    return Event(detail::check_token("aethercl_event_record",
                                     aethercl_event_record(device_.index(), handle_)));
  }
  // Later work on this stream waits for event, without blocking the caller.
  void wait(const Event& event) const {
    detail::check("aethercl_stream_wait_event",
                  aethercl_stream_wait_event(device_.index(), handle_, event.get()));
  }

 private:
  void release() noexcept {
    if (handle_ != nullptr) aethercl_stream_destroy(device_.index(), std::exchange(handle_, nullptr));
  }
  Device device_;
  void* handle_ = nullptr;
};

// What a graph holds (aethercl_graph_info).
struct GraphInfo {
  long long device, nodes, kernels, bytes_held;
};

// A graph (ABI version 4): the work a callable issues on a stream, captured once and replayed
// with one call; each launch reads the current contents of the buffers the captured calls named.
// While capturing, calls that must wait for the device on that stream (blocking reads and writes,
// synchronisation) throw and are not recorded. Destroyed with its owner, after its last launch.
class Graph {
 public:
  // Records what record() issues on stream (nullptr: the device's default stream). If record
  // throws, the capture is ended and discarded and the exception propagates.
  template <class Record>
  static Graph capture(Device device, const Stream* stream, Record&& record) {
    void* raw = stream ? stream->get() : nullptr;
    detail::check("aethercl_graph_capture_begin",
                  aethercl_graph_capture_begin(device.index(), raw));
    try {
      record();
    } catch (...) {
      aethercl_graph_destroy(aethercl_graph_capture_end(device.index(), raw));
      throw;
    }
    return Graph(detail::check_token("aethercl_graph_capture_end",
                                     aethercl_graph_capture_end(device.index(), raw)));
  }

  // Enqueues the recorded work on stream (nullptr: the default stream of the graph's device).
  void launch(const Stream* stream = nullptr) const {
    detail::check("aethercl_graph_launch",
                  aethercl_graph_launch(token_.get(), stream ? stream->get() : nullptr));
  }
  GraphInfo info() const {
    const std::string text = detail::text_out("aethercl_graph_info", [&](char* out, std::size_t n) {
      return aethercl_graph_info(token_.get(), out, n);
    });
    return {detail::json_integer(text, "device"), detail::json_integer(text, "nodes"),
            detail::json_integer(text, "kernels"), detail::json_integer(text, "bytes_held")};
  }
  void* get() const noexcept { return token_.get(); }

 private:
  explicit Graph(void* token) noexcept : token_(token) {}
  detail::Owner<detail::ReleaseGraph> token_;
};

// Work sizes of a launch: 1 to 3 dimensions; NullRange lets the runtime pick the local size.
class NDRange {
 public:
  constexpr NDRange() noexcept = default;
  constexpr NDRange(std::size_t x) noexcept : dims_(1), sizes_{x, 1, 1} {}  // NOLINT: implicit
  constexpr NDRange(std::size_t x, std::size_t y) noexcept : dims_(2), sizes_{x, y, 1} {}
  constexpr NDRange(std::size_t x, std::size_t y, std::size_t z) noexcept
      : dims_(3), sizes_{x, y, z} {}
  constexpr int dimensions() const noexcept { return dims_; }
  const std::size_t* data() const noexcept { return dims_ == 0 ? nullptr : sizes_; }

 private:
  int dims_ = 0;
  std::size_t sizes_[3] = {0, 0, 0};
};
inline constexpr NDRange NullRange{};

// __local memory of a launch argument.
struct Local {
  std::size_t bytes;
};
template <class T> Local local(std::size_t count) noexcept { return Local{count * sizeof(T)}; }

namespace detail {
template <class T> aethercl_arg to_arg(const Buffer<T>& buffer) noexcept {
  return aethercl_arg{AETHERCL_ARG_BUFFER, 0, buffer.get()};
}
inline aethercl_arg to_arg(const Local& local) noexcept {
  return aethercl_arg{AETHERCL_ARG_LOCAL, local.bytes, nullptr};
}
// Scalars are passed with their own size: the library checks it against the parameter's type.
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
aethercl_arg to_arg(const T& value) noexcept {
  return aethercl_arg{AETHERCL_ARG_SCALAR, sizeof(T), &value};
}
}  // namespace detail

// A kernel token (aethercl_kernel_create); launches already issued still run after it dies.
class Kernel {
 public:
  Kernel(Device device, void* token, std::string name)
      : device_(device), token_(token), name_(std::move(name)) {}
  const std::string& name() const noexcept { return name_; }
  void* get() const noexcept { return token_.get(); }
  std::string info() const {
    return detail::text_out("aethercl_kernel_info", [this](char* b, std::size_t c) {
      return aethercl_kernel_info(token_.get(), b, c);
    });
  }
  // Launches on the default stream; arguments are Buffer<T>s, Local{bytes}, or numbers (passed
  // with their own type's size: write 1000u for a uint parameter, 2.0f for a float).
  template <class... Args>
  void launch(const NDRange& global, const NDRange& local, const Args&... args) const {
    enqueue(nullptr, global, local, args...);
  }
  template <class... Args>
  void launch(const Stream& stream, const NDRange& global, const NDRange& local,
              const Args&... args) const {
    enqueue(stream.get(), global, local, args...);
  }

 private:
  template <class... Args>
  void enqueue(void* stream, const NDRange& global, const NDRange& local,
               const Args&... args) const {
    if (local.dimensions() != 0 && local.dimensions() != global.dimensions())
      throw Error("aethercl_launch", AETHERCL_INVALID_ARGUMENT,
                  "local has " + std::to_string(local.dimensions()) + " dimensions, global " +
                      std::to_string(global.dimensions()));
    const aethercl_arg raw[sizeof...(Args) + 1] = {detail::to_arg(args)..., aethercl_arg{}};
    detail::check("aethercl_launch",
                  aethercl_launch(device_.index(), token_.get(), stream, global.dimensions(),
                                  global.data(), local.data(), static_cast<int>(sizeof...(Args)),
                                  raw));
  }
  Device device_;
  detail::Owner<detail::ReleaseKernel> token_;
  std::string name_;
};

// A program built from OpenCL C (aethercl_program_create); its kernels outlive it.
class Program {
 public:
  Program(Device device, const std::string& source, const std::string& options = "")
      : device_(device),
        token_(detail::check_token("aethercl_program_create",
                                   aethercl_program_create(device.index(), source.c_str(),
                                                           options.c_str()))) {}
  Kernel kernel(const std::string& name) const {
    return Kernel(device_, detail::check_token("aethercl_kernel_create",
                                               aethercl_kernel_create(token_.get(), name.c_str())),
                  name);
  }
  void* get() const noexcept { return token_.get(); }

 private:
  Device device_;
  detail::Owner<detail::ReleaseProgram> token_;
};

// C[b] (m x n) = alpha * op(A[b]) op(B[b]) + beta * C[b] (aethercl_gemm_desc). Leading
// dimensions of 0 and strides of -1 mean those of packed operands.
struct Gemm {
  int m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
  int lda = 0, ldb = 0, ldc = 0;
  long long stride_a = -1, stride_b = -1, stride_c = -1;
  Compute compute = Compute::COMPUTE_DEFAULT;

  // Enqueues the product on stream (nullptr: the default stream); the library checks every
  // element touched against the buffers.
  template <class T>
  void run(const Device& device, const Buffer<T>& a, const Buffer<T>& b, const Buffer<T>& c,
           const Stream* stream = nullptr) const {
    auto desc = descriptor<aethercl_gemm_desc>();
    desc.trans_a = trans_a;
    desc.trans_b = trans_b;
    desc.m = m;
    desc.n = n;
    desc.k = k;
    desc.batch = batch;
    desc.lda = lda ? lda : std::max(trans_a ? m : k, 1);
    desc.ldb = ldb ? ldb : std::max(trans_b ? k : n, 1);
    desc.ldc = ldc ? ldc : std::max(n, 1);
    desc.stride_a = stride_a >= 0 ? stride_a : static_cast<long long>(trans_a ? k : m) * desc.lda;
    desc.stride_b = stride_b >= 0 ? stride_b : static_cast<long long>(trans_b ? n : k) * desc.ldb;
    desc.stride_c = stride_c >= 0 ? stride_c : static_cast<long long>(m) * desc.ldc;
    desc.alpha = alpha;
    desc.beta = beta;
    desc.a = a.get();
    desc.b = b.get();
    desc.c = c.get();
    desc.dtype_a = desc.dtype_b = desc.dtype_c = detail::dtype_of<T>();
    desc.compute = static_cast<int>(compute);
    detail::check("aethercl_gemm",
                  aethercl_gemm(device.index(), &desc, stream ? stream->get() : nullptr));
  }
};

template <class T> Buffer<T> Device::alloc(std::size_t count) const { return Buffer<T>(*this, count); }
template <class T> Buffer<T> Device::buffer(const std::vector<T>& data) const {
  Buffer<T> buffer(*this, data.size());
  buffer.write(data);
  return buffer;
}
inline Program Device::program(const std::string& source, const std::string& options) const {
  return Program(*this, source, options);
}
inline Stream Device::stream(bool timing) const { return Stream(*this, timing); }
inline Event Device::record_event() const {
  return Event(detail::check_token("aethercl_event_record", aethercl_event_record(index_, nullptr)));
}

}  // namespace aethercl

#endif  // AETHERCL_HPP
