// aethercl_gemm: every descriptor field checked (sizes overflow-safe, buffers resolved and sized,
// C not overlapping A or B), the compute mode resolved, then one engine product.
#include "gemm/general_gemm.h"

#include "gemm/compute_mode.h"
#include "gemm/gemm.h"
#include "support/checked.h"

#include <cstring>

namespace aethercl::gemm {
namespace {

GemmStorage storage_of(int dtype, const char* argument) {
  switch (dtype) {
    case AETHERCL_F32: return GemmStorage::kF32;
    case AETHERCL_F16: return GemmStorage::kF16;
    case AETHERCL_BF16: return GemmStorage::kBF16;
    case AETHERCL_F64:
    case AETHERCL_I32:
    case AETHERCL_I64:
    case AETHERCL_I8:
    case AETHERCL_U8:
      fail(Status::kInvalidArgument, "{} = {}: aethercl_gemm takes f32, f16 or bf16 operands",
           argument, dtype);
    default:
      fail(Status::kInvalidArgument, "{} = {} is not a dtype code", argument, dtype);
  }
}

struct Extent {
  std::uint64_t first = 0;  // elements
  std::uint64_t end = 0;    // one past the last element touched; first when nothing is
  bool touched() const { return end > first; }
};

// The elements an operand stored rows x cols spans over the batch; throws for a leading
// dimension below the row length and for sizes that overflow.
Extent extent_of(const char* name, std::uint64_t offset, long long ld, long long stride,
                 std::uint64_t batch, std::uint64_t rows, std::uint64_t cols, bool touched) {
  const std::uint64_t min_ld = cols > 0 ? cols : 1;
  if (ld < 0 || static_cast<std::uint64_t>(ld) < min_ld) {
    fail(Status::kInvalidArgument, "desc->ld{} = {} is below the stored row length {} (at "
         "least max(1, columns))", name, ld, cols);
  }
  if (!touched || batch == 0 || rows == 0 || cols == 0) return {offset, offset};
  auto span = checked_mul(rows - 1, static_cast<std::uint64_t>(ld));
  auto strides = checked_mul(batch - 1, static_cast<std::uint64_t>(stride));
  auto end = span && strides ? checked_add(*span, *strides) : std::nullopt;
  if (end) end = checked_add(*end, cols);
  if (end) end = checked_add(*end, offset);
  if (!end) {
    fail(Status::kInvalidArgument, "operand {}: offset {} + (batch - 1) * stride {} + (rows - 1) "
         "* ld {} + columns {} overflows 64 bits", name, offset, stride, ld, cols);
  }
  return {offset, *end};
}

std::uint64_t byte_size(const char* name, std::uint64_t elements, GemmStorage storage) {
  auto bytes = checked_mul(elements, storage_bytes(storage));
  if (!bytes) fail(Status::kInvalidArgument, "operand {} spans more bytes than 64 bits hold", name);
  return *bytes;
}

void require_no_overlap(const void* c, const Extent& c_extent, std::uint64_t c_bytes,
                        const void* other, const Extent& other_extent, std::uint64_t other_bytes,
                        const char* name) {
  if (c != other || !c_extent.touched() || !other_extent.touched()) return;
  const std::uint64_t c_first = c_extent.first * c_bytes;
  const std::uint64_t c_end = c_extent.end * c_bytes;
  const std::uint64_t first = other_extent.first * other_bytes;
  const std::uint64_t end = other_extent.end * other_bytes;
  if (c_first < end && first < c_end) {
    fail(Status::kInvalidArgument, "desc->c overlaps desc->{} in the same buffer (C bytes [{}, "
         "{}), {} bytes [{}, {})); the product cannot run in place", name, c_first, c_end, name,
         first, end);
  }
}

void require_flag(const char* name, int value) {
  if (value != 0 && value != 1) {
    fail(Status::kInvalidArgument, "desc->{} = {} is not 0 or 1", name, value);
  }
}

void require_non_negative(const char* name, long long value) {
  if (value < 0) fail(Status::kInvalidArgument, "desc->{} = {} is negative", name, value);
}

}  // namespace

ValidatedGemm validate_gemm(DeviceCall& call, const aethercl_gemm_desc* desc) {
  if (desc == nullptr) fail(Status::kInvalidArgument, "desc is NULL");
  std::size_t struct_size = 0;
  std::memcpy(&struct_size, desc, sizeof(struct_size));
  if (struct_size < sizeof(aethercl_gemm_desc)) {
    fail(Status::kInvalidArgument, "desc->struct_size = {} is smaller than the version-3 "
         "descriptor ({} bytes): set it to sizeof(aethercl_gemm_desc)", struct_size,
         sizeof(aethercl_gemm_desc));
  }
  const aethercl_gemm_desc& d = *desc;
  require_flag("trans_a", d.trans_a);
  require_flag("trans_b", d.trans_b);
  require_non_negative("m", d.m);
  require_non_negative("n", d.n);
  require_non_negative("k", d.k);
  require_non_negative("batch", d.batch);
  require_non_negative("stride_a", d.stride_a);
  require_non_negative("stride_b", d.stride_b);
  require_non_negative("stride_c", d.stride_c);
  if (d.stride_c == 0 && d.batch > 1) {
    fail(Status::kInvalidArgument, "desc->stride_c = 0 with batch = {}: every batch item would "
         "write the same C", d.batch);
  }
  const GemmStorage storage_a = storage_of(d.dtype_a, "desc->dtype_a");
  const GemmStorage storage_b = storage_of(d.dtype_b, "desc->dtype_b");
  const GemmStorage storage_c = storage_of(d.dtype_c, "desc->dtype_c");
  if (storage_a != storage_b) {
    fail(Status::kInvalidArgument, "desc->dtype_a = {} and desc->dtype_b = {} differ: A and B "
         "must have the same dtype", d.dtype_a, d.dtype_b);
  }
  ComputeMode mode = compute_mode_from_code(d.compute, "desc->compute");

  const auto m = static_cast<std::uint64_t>(d.m);
  const auto n = static_cast<std::uint64_t>(d.n);
  const auto k = static_cast<std::uint64_t>(d.k);
  const auto batch = static_cast<std::uint64_t>(d.batch);
  const bool work = m > 0 && n > 0 && batch > 0;
  const bool reads_inputs = work && k > 0;
  const Extent a_extent = extent_of("a", d.offset_a, d.lda, d.stride_a, batch, d.trans_a ? k : m,
                                    d.trans_a ? m : k, reads_inputs);
  const Extent b_extent = extent_of("b", d.offset_b, d.ldb, d.stride_b, batch, d.trans_b ? n : k,
                                    d.trans_b ? k : n, reads_inputs);
  const Extent c_extent = extent_of("c", d.offset_c, d.ldc, d.stride_c, batch, m, n, work);
  BufferView a = call.buffer(d.a, "desc->a", byte_size("a", a_extent.end, storage_a));
  BufferView b = call.buffer(d.b, "desc->b", byte_size("b", b_extent.end, storage_b));
  BufferView c = call.buffer(d.c, "desc->c", byte_size("c", c_extent.end, storage_c));
  const std::uint64_t ab_bytes = storage_bytes(storage_a);
  const std::uint64_t c_bytes = storage_bytes(storage_c);
  require_no_overlap(d.c, c_extent, c_bytes, d.a, a_extent, ab_bytes, "a");
  require_no_overlap(d.c, c_extent, c_bytes, d.b, b_extent, ab_bytes, "b");
  if (mode == ComputeMode::kDefault) mode = matmul_precision(call);

  ValidatedGemm validated;
  validated.work = work;
  validated.a = {d.a, a_extent.first * ab_bytes, a_extent.end * ab_bytes};
  validated.b = {d.b, b_extent.first * ab_bytes, b_extent.end * ab_bytes};
  validated.c = {d.c, c_extent.first * c_bytes, c_extent.end * c_bytes};
  GemmProblem& problem = validated.problem;
  problem.trans_a = d.trans_a != 0;
  problem.trans_b = d.trans_b != 0;
  problem.m = m;
  problem.n = n;
  problem.k = k;
  problem.batch = batch;
  problem.a = {a, static_cast<std::uint64_t>(d.stride_a), d.offset_a,
               static_cast<std::uint64_t>(d.lda), storage_a};
  problem.b = {b, static_cast<std::uint64_t>(d.stride_b), d.offset_b,
               static_cast<std::uint64_t>(d.ldb), storage_b};
  problem.c = {c, static_cast<std::uint64_t>(d.stride_c), d.offset_c,
               static_cast<std::uint64_t>(d.ldc), storage_c};
  problem.alpha = d.alpha;
  problem.beta = d.beta;
  apply_compute_mode(problem, mode);
  return validated;
}

void general_gemm(DeviceCall& call, const aethercl_gemm_desc* desc) {
  const ValidatedGemm validated = validate_gemm(call, desc);
  if (validated.work) enqueue_gemm(call, validated.problem);
}

}  // namespace aethercl::gemm
