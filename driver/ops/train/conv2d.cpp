// Convolution as GEMMs over chunks of images. For a chunk of nc images, im2col builds cols
// (c_in * kh * kw) x (nc * positions); group g owns rows [g K, (g + 1) K) with K = (c_in / groups)
// * kh * kw, so one batched GEMM over the groups computes every group's product:
//   forward          Y_g  (c_out/G x nc P) = W_g (c_out/G x K) . cols_g (K x nc P)
//   backward data    dcols_g (K x nc P)    = W_g^T . dY_g, then col2im
//   backward weight  dW_g (c_out/G x K)    = dY_g . cols_g^T, summed over chunks
// Y and dY travel in the GEMM's channel-major layout (c_out x nc P) and are moved to and from
// NCHW by small kernels. Chunks keep cols within kColsBudget bytes. Depthwise convolutions
// (groups = c_in = c_out) skip the GEMMs and run three direct kernels.
#include "ops/train/conv2d.h"

#include "ops/aliasing.h"
#include "gemm/compute_mode.h"
#include "gemm/gemm.h"
#include "ops/train/common.h"
#include "support/env.h"

#include <algorithm>
#include <optional>

namespace aethercl::ops::train {
namespace {

// Every product of a convolution runs in its compute mode (DEFAULT: the device's matmul
// precision, as the seed matmul entry points).
void enqueue_gemm(DeviceCall& call, gemm::GemmProblem& problem, gemm::ComputeMode mode) {
  gemm::apply_compute_mode(problem, mode == gemm::ComputeMode::kDefault
                                        ? gemm::matmul_precision(call) : mode);
  gemm::enqueue_gemm(call, problem);
}
using gemm::GemmOperand;
using gemm::GemmProblem;

constexpr const char* kFamily = "conv";
constexpr std::uint64_t kColsBudget = 64ull << 20;

// Mirrors conv_geometry in kernels/conv.cl.
struct KernelGeometry {
  cl_ulong c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

struct ConvShape {
  std::uint64_t n, c_in, h, w, c_out, kh, kw, sh, sw, ph, pw, dh, dw, groups, oh, ow;
  std::uint64_t positions() const { return oh * ow; }
  std::uint64_t k_group() const { return (c_in / groups) * kh * kw; }
  std::uint64_t out_group() const { return c_out / groups; }
  std::uint64_t x_count, w_count, y_count;
  gemm::ComputeMode mode = gemm::ComputeMode::kDefault;
  KernelGeometry kernel() const {
    return {c_in, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow};
  }
};

std::uint64_t output_size(const char* what, std::uint64_t in, std::uint64_t pad,
                          std::uint64_t dilation, std::uint64_t kernel, std::uint64_t stride) {
  // (in + 2 pad - dilation (kernel - 1) - 1) / stride + 1, checked against underflow.
  const std::uint64_t span = dilation * (kernel - 1) + 1;
  const std::uint64_t padded = in + 2 * pad;
  if (padded < span) {
    fail(Status::kInvalidArgument, "the {} kernel extent {} exceeds the padded input {}", what,
         span, padded);
  }
  return (padded - span) / stride + 1;
}

ConvShape shape_of(const aethercl_conv2d_desc& d) {
  ConvShape s{};
  s.n = dim("desc.n", d.n);
  s.c_in = dim("desc.c_in", d.c_in);
  s.h = dim("desc.h", d.h);
  s.w = dim("desc.w", d.w);
  s.c_out = dim("desc.c_out", d.c_out);
  s.kh = positive("desc.kernel_h", d.kernel_h);
  s.kw = positive("desc.kernel_w", d.kernel_w);
  s.sh = positive("desc.stride_h", d.stride_h);
  s.sw = positive("desc.stride_w", d.stride_w);
  s.ph = dim("desc.pad_h", d.pad_h);
  s.pw = dim("desc.pad_w", d.pad_w);
  s.dh = positive("desc.dilation_h", d.dilation_h);
  s.dw = positive("desc.dilation_w", d.dilation_w);
  s.groups = positive("desc.groups", d.groups);
  if (s.c_in % s.groups != 0 || s.c_out % s.groups != 0) {
    fail(Status::kInvalidArgument, "desc.groups = {} must divide desc.c_in = {} and desc.c_out = "
         "{}", s.groups, s.c_in, s.c_out);
  }
  s.mode = gemm::compute_mode_from_code(d.compute, "desc.compute");
  // All are below 2^31, so these sums and products cannot overflow 64 bits.
  s.oh = output_size("vertical", s.h, s.ph, s.dh, s.kh, s.sh);
  s.ow = output_size("horizontal", s.w, s.pw, s.dw, s.kw, s.sw);
  s.x_count = product("desc.x", {s.n, s.c_in, s.h, s.w});
  s.w_count = product("desc.weight", {s.c_out, s.c_in / s.groups, s.kh, s.kw});
  s.y_count = product("desc.y", {s.n, s.c_out, s.oh, s.ow});
  return s;
}

// Images per chunk: as many as keep cols within the budget (and the device's largest buffer).
std::uint64_t chunk_images(const Device& device, const ConvShape& s) {
  const std::uint64_t rows = s.c_in * s.kh * s.kw;
  const std::uint64_t per_image = std::max<std::uint64_t>(1, rows * s.positions() * 4);
  std::uint64_t budget = std::min(kColsBudget, device.info().max_alloc_bytes);
  // Testing knob: small chunks exercise the accumulation across chunks on small inputs.
  if (auto forced = env::bytes(env::kConvColsBytes); forced && *forced > 0) budget = *forced;
  if (per_image > device.info().max_alloc_bytes) {
    fail(Status::kOutOfMemory, "one image's im2col matrix needs {} bytes; the device's largest "
         "buffer is {} bytes", per_image, device.info().max_alloc_bytes);
  }
  return std::clamp<std::uint64_t>(budget / per_image, 1, s.n);
}

// The layout kernels index with 32-bit arithmetic when every index of the op fits: the
// tensors, the column matrix of a chunk and the padded input coordinates.
bool narrow_indices(const ConvShape& s, std::uint64_t nc) {
  constexpr std::uint64_t kLimit = 1ull << 32;
  const std::uint64_t cols = s.c_in * s.kh * s.kw * nc * s.positions();
  return cols < kLimit && s.x_count < kLimit && s.y_count < kLimit &&
         (s.h + 2 * s.ph + s.dh * s.kh) * (s.w + 2 * s.pw + s.dw * s.kw) < kLimit;
}

// Launches a kernel of the conv family over `items` work-items (each walks one contiguous row).
template <typename... Args>
void launch_conv(DeviceCall& call, const ConvShape& s, std::uint64_t nc, const char* name,
                 std::uint64_t items, const Args&... args) {
  Kernel& kernel = call.device().programs().kernel(
      kFamily, name, narrow_indices(s, nc) ? "-DCONV_INDEX32=1" : "-DCONV_INDEX32=0");
  call.launch(kernel, linear_geometry(call.device(), kernel, items), args...);
}

// groups = c_in = c_out: one filter per channel, computed directly (kernels/conv.cl) instead of
// as c_in one-row GEMMs.
bool depthwise(const ConvShape& s) { return s.groups == s.c_in && s.c_out == s.c_in; }

// The layout kernels come in two forms (kernels/conv.cl): a contiguous row per work-item for CPU
// devices, one element per item (coalesced) elsewhere.
bool row_forms(DeviceCall& call) { return cpu_kernel_forms(call.device()); }

void im2col(DeviceCall& call, const ConvShape& s, cl_mem x, cl_mem cols, std::uint64_t n0,
            std::uint64_t nc) {
  if (row_forms(call)) {
    launch_conv(call, s, nc, "conv_im2col", s.c_in * s.kh * s.kw * nc * s.oh, x, cols, ul(n0),
                ul(nc), s.kernel());
  } else {
    launch_conv(call, s, nc, "conv_im2col_elements", s.c_in * s.kh * s.kw * nc * s.positions(), x,
                cols, ul(n0), ul(nc), s.kernel());
  }
}

void col2im(DeviceCall& call, const ConvShape& s, cl_mem cols, cl_mem dx, std::uint64_t n0,
            std::uint64_t nc) {
  if (row_forms(call)) {
    launch_conv(call, s, nc, "conv_col2im", nc * s.c_in * s.h, cols, dx, ul(n0), ul(nc),
                s.kernel());
  } else {
    launch_conv(call, s, nc, "conv_col2im_elements", nc * s.c_in * s.h * s.w, cols, dx, ul(n0),
                ul(nc), s.kernel());
  }
}

// y (NCHW) of images n0 .. n0 + nc from the GEMM's channel-major matrix, plus the bias.
void matrix_to_nchw(DeviceCall& call, const ConvShape& s, cl_mem mat, const BufferView* bias,
                    cl_mem y, std::uint64_t n0, std::uint64_t nc) {
  const bool rows = row_forms(call);
  launch_conv(call, s, nc, rows ? "conv_matrix_to_nchw" : "conv_matrix_to_nchw_elements",
              nc * s.c_out * (rows ? 1 : s.positions()), mat, bias ? bias->mem : mat,
              static_cast<cl_int>(bias != nullptr), y, ul(n0), ul(nc), ul(s.c_out),
              ul(s.positions()));
}

void nchw_to_matrix(DeviceCall& call, const ConvShape& s, cl_mem t, cl_mem mat, std::uint64_t n0,
                    std::uint64_t nc) {
  const bool rows = row_forms(call);
  launch_conv(call, s, nc, rows ? "conv_nchw_to_matrix" : "conv_nchw_to_matrix_elements",
              nc * s.c_out * (rows ? 1 : s.positions()), t, mat, ul(n0), ul(nc), ul(s.c_out),
              ul(s.positions()));
}

// dweight of a depthwise convolution. One item per weight walks every image; where that leaves
// the device idle (fewer weights than half of 1,024 items per compute unit, off CPU devices) the
// images are cut into chunks: partial sums per (weight, chunk), then their sum in chunk order.
void depthwise_weight_gradient(DeviceCall& call, const ConvShape& s, cl_mem x, cl_mem dy,
                               cl_mem dweight) {
  Device& device = call.device();
  const std::uint64_t weights = s.w_count;
  const std::uint64_t wanted =
      std::max<std::uint64_t>(1, device.info().compute_units) * std::uint64_t{1024};
  if (row_forms(call) || s.n < 2 || weights * 2 > wanted) {
    launch_conv(call, s, s.n, "conv_depthwise_backward_weight", weights, x, dy, dweight, ul(s.n),
                s.kernel());
    return;
  }
  // The partials are an optional workspace: half as many chunks where they do not fit; the
  // one-item-per-weight kernel where not even two chunks' do.
  std::optional<Scratch> scratch;
  std::uint64_t chunk = 0, used = 0;
  for (std::uint64_t chunks = std::min(s.n, (wanted + weights - 1) / weights); chunks >= 2;
       chunks /= 2) {
    chunk = (s.n + chunks - 1) / chunks;
    used = (s.n + chunk - 1) / chunk;  // no empty chunk
    if (optional_scratch(scratch, call, bytes_of(weights * used, acc_bytes(device)),
                         fmt::format("depthwise weight-gradient partials of {} chunks", used))) {
      break;
    }
  }
  if (!scratch) {
    launch_conv(call, s, s.n, "conv_depthwise_backward_weight", weights, x, dy, dweight, ul(s.n),
                s.kernel());
    return;
  }
  const Scratch& partials = *scratch;
  launch_conv(call, s, s.n, "conv_depthwise_weight_partials", weights * used, x, dy,
              partials.mem(), ul(s.n), ul(chunk), s.kernel());
  launch_linear(call, kFamily, "conv_depthwise_weight_fold", weights, partials.mem(), dweight,
                ul(weights), ul(used));
}

GemmOperand operand(cl_mem mem, std::uint64_t bytes, std::uint64_t stride) {
  return GemmOperand{BufferView{mem, bytes}, stride};
}

// The column matrix and the channel-major matrix of a chunk of images: an optional workspace
// beyond one image. From chunk_images' count down to one image, halving, the first chunk whose
// two buffers fit; one image's is intrinsic (kOutOfMemory from the pool where it does not fit).
struct ChunkScratch {
  std::uint64_t images = 0;
  std::optional<Scratch> cols, mat;
};

void chunk_scratch(DeviceCall& call, const ConvShape& s, ChunkScratch& out) {
  const std::uint64_t k = s.k_group();
  for (std::uint64_t nc = chunk_images(call.device(), s);; nc = (nc + 1) / 2) {
    out.mat.reset();
    const std::string purpose = fmt::format("convolution columns of {} images", nc);
    if (nc == 1) {  // intrinsic
      out.cols.emplace(call, bytes_of(s.groups * k * s.positions(), 4),
                       "one image's convolution column matrix");
      out.mat.emplace(call, bytes_of(s.c_out * s.positions(), 4),
                      "one image's convolution output matrix");
    } else if (!optional_scratch(out.cols, call, bytes_of(s.groups * k * nc * s.positions(), 4),
                                 purpose) ||
               !optional_scratch(out.mat, call, bytes_of(s.c_out * nc * s.positions(), 4),
                                 purpose)) {
      out.cols.reset();
      continue;
    }
    out.images = nc;
    return;
  }
}

}  // namespace

void conv2d_forward(DeviceCall& call, const aethercl_conv2d_desc& d) {
  const ConvShape s = shape_of(d);
  cl_mem x = call.buffer(d.x, "desc.x", bytes_of(s.x_count, 4)).mem;
  BufferView weight = call.buffer(d.weight, "desc.weight", bytes_of(s.w_count, 4));
  auto bias = call.optional_buffer(d.bias, "desc.bias", bytes_of(s.c_out, 4));
  cl_mem y = call.buffer(d.y, "desc.y", bytes_of(s.y_count, 4)).mem;
  require_distinct(d.y, "desc.y", d.x, "desc.x");
  require_distinct(d.y, "desc.y", d.weight, "desc.weight");
  require_distinct(d.y, "desc.y", d.bias, "desc.bias");
  if (s.y_count == 0) return;
  if (depthwise(s)) {
    launch_conv(call, s, s.n, "conv_depthwise_forward", s.y_count, x, weight.mem,
                bias ? bias->mem : weight.mem, static_cast<cl_int>(bool(bias)), y, ul(s.n),
                s.kernel());
    return;
  }
  const std::uint64_t k = s.k_group(), m = s.out_group();
  ChunkScratch chunk;
  chunk_scratch(call, s, chunk);
  const std::uint64_t nc_max = chunk.images;
  const Scratch& cols = *chunk.cols;
  const Scratch& mat = *chunk.mat;
  for (std::uint64_t n0 = 0; n0 < s.n; n0 += nc_max) {
    const std::uint64_t nc = std::min(nc_max, s.n - n0), width = nc * s.positions();
    if (k > 0) {
      im2col(call, s, x, cols.mem(), n0, nc);
      GemmProblem p;
      p.m = m;
      p.n = width;
      p.k = k;
      p.batch = s.groups;
      p.a = GemmOperand{weight, m * k};
      p.b = operand(cols.mem(), cols.view().size, k * width);
      p.c = operand(mat.mem(), mat.view().size, m * width);
      enqueue_gemm(call, p, s.mode);
    } else {
      // No input channels: the products are empty sums.
      launch_linear(call, "fill", "fill_zero", s.c_out * width, mat.mem(),
                    ul(s.c_out * width));
    }
    matrix_to_nchw(call, s, mat.mem(), bias ? &*bias : nullptr, y, n0, nc);
  }
}

void conv2d_backward(DeviceCall& call, const aethercl_conv2d_desc& d) {
  const ConvShape s = shape_of(d);
  cl_mem x = call.buffer(d.x, "desc.x", bytes_of(s.x_count, 4)).mem;
  BufferView weight = call.buffer(d.weight, "desc.weight", bytes_of(s.w_count, 4));
  cl_mem dy = call.buffer(d.dy, "desc.dy", bytes_of(s.y_count, 4)).mem;
  auto dx = call.optional_buffer(d.dx, "desc.dx", bytes_of(s.x_count, 4));
  auto dweight = call.optional_buffer(d.dweight, "desc.dweight", bytes_of(s.w_count, 4));
  auto dbias = call.optional_buffer(d.dbias, "desc.dbias", bytes_of(s.c_out, 4));
  const void* outputs[] = {d.dx, d.dweight, d.dbias};
  const char* output_names[] = {"desc.dx", "desc.dweight", "desc.dbias"};
  const void* inputs[] = {d.x, d.weight, d.dy};
  const char* input_names[] = {"desc.x", "desc.weight", "desc.dy"};
  for (int o = 0; o < 3; ++o) {
    for (int i = 0; i < 3; ++i) require_distinct(outputs[o], output_names[o], inputs[i], input_names[i]);
    for (int p = o + 1; p < 3; ++p) require_distinct(outputs[o], output_names[o], outputs[p], output_names[p]);
  }
  Device& device = call.device();
  const std::uint64_t k = s.k_group(), m = s.out_group();
  if (dbias && s.c_out > 0) {
    launch_slices(call, kFamily, "conv_channel_sum", s.c_out, s.n * s.positions(), acc_bytes(device),
                  dy, dbias->mem, ul(s.n), ul(s.c_out), ul(s.positions()));
  }
  // With no images or no input channels: dweight is an empty sum, dx is empty or has no output
  // to come from (c_out = 0 gives zeros).
  const bool no_products = s.n == 0 || k == 0 || m == 0;
  if (no_products) {
    if (dweight && s.w_count > 0) {
      launch_linear(call, "fill", "fill_zero", s.w_count, dweight->mem, ul(s.w_count));
    }
    if (dx && s.x_count > 0) {
      launch_linear(call, "fill", "fill_zero", s.x_count, dx->mem, ul(s.x_count));
    }
    return;
  }
  if (!dx && !dweight) return;
  if (depthwise(s)) {
    if (dweight) {
      depthwise_weight_gradient(call, s, x, dy, dweight->mem);
    }
    if (dx) {
      launch_conv(call, s, s.n, "conv_depthwise_backward_data", s.x_count, dy, weight.mem,
                  dx->mem, ul(s.n), s.kernel());
    }
    return;
  }
  ChunkScratch chunk;
  chunk_scratch(call, s, chunk);
  const std::uint64_t nc_max = chunk.images;
  const Scratch& cols = *chunk.cols;
  const Scratch& dmat = *chunk.mat;
  // Each later chunk's dweight product goes to partial_dw and is added; without room for it the
  // product adds itself to dweight (beta 1: the same sum, rounded once per chunk either way).
  std::optional<Scratch> partial_dw;
  if (dweight && nc_max < s.n) {
    optional_scratch(partial_dw, call, bytes_of(s.w_count, 4), "a chunk's weight gradient");
  }
  for (std::uint64_t n0 = 0; n0 < s.n; n0 += nc_max) {
    const std::uint64_t nc = std::min(nc_max, s.n - n0), width = nc * s.positions();
    nchw_to_matrix(call, s, dy, dmat.mem(), n0, nc);
    const GemmOperand dmat_op = operand(dmat.mem(), dmat.view().size, m * width);
    if (dweight) {
      im2col(call, s, x, cols.mem(), n0, nc);
      GemmProblem p;
      p.trans_b = true;
      p.m = m;
      p.n = k;
      p.k = width;
      p.batch = s.groups;
      p.a = dmat_op;
      p.b = operand(cols.mem(), cols.view().size, k * width);
      const bool first = n0 == 0;
      const bool separate = !first && partial_dw;
      p.c = separate ? operand(partial_dw->mem(), partial_dw->view().size, m * k)
                     : GemmOperand{*dweight, m * k};
      if (!first && !separate) p.beta = 1.0f;
      enqueue_gemm(call, p, s.mode);  // long k (images x positions): split-K where it pays
      if (separate) {
        launch_linear(call, kFamily, "conv_accumulate", s.w_count, dweight->mem, partial_dw->mem(),
                      ul(s.w_count));
      }
    }
    if (dx) {
      // dcols reuses the cols scratch (the weight GEMM above has been enqueued before it).
      GemmProblem p;
      p.trans_a = true;
      p.m = k;
      p.n = width;
      p.k = m;
      p.batch = s.groups;
      p.a = GemmOperand{weight, m * k};
      p.b = dmat_op;
      p.c = operand(cols.mem(), cols.view().size, k * width);
      enqueue_gemm(call, p, s.mode);
      col2im(call, s, cols.mem(), dx->mem, n0, nc);
    }
  }
}

}  // namespace aethercl::ops::train
