// Matrix products: validate dimensions and buffers against the tensor shapes of docs/ABI.md
// section 4.4, then express each product as one or two GEMMs. Products with a weight shared over
// the batch run as a single GEMM over the flattened (B*M) rows; the weight gradient's reduction
// over the batch is the k loop of one transposed-A GEMM (dW = A_flat^T @ dC_flat), so nothing
// accumulates.
//
// Buffers are checked against the declared shapes even when a zero dimension makes the call a
// no-op: a buffer smaller than the shape it is said to hold is refused. No output may be an input
// or the other output: the tiled kernel would read tiles it has already overwritten.
#include "ops/matmul.h"

#include "gemm/compute_mode.h"
#include "gemm/gemm.h"
#include "ops/aliasing.h"

namespace aethercl::ops {

using gemm::enqueue_gemm;
using gemm::GemmProblem;

namespace {

// Dimensions and the byte sizes of A (B,M,K), the second operand (K,N) or (B,K,N), and C or dC
// (B,M,N). Throws for negative dimensions (naming the first) and overflowing products, before
// any buffer is looked at.
struct Dims {
  std::uint64_t b, m, n, k;
  std::uint64_t a_bytes, b_bytes, c_bytes;
  bool empty() const { return b == 0 || m == 0 || n == 0 || k == 0; }
};

std::uint64_t float_bytes(std::initializer_list<Dim> dims) {
  return byte_count(element_count(dims), sizeof(float));
}

Dims dims_of(int B, int M, int N, int K, bool batched_b) {
  for (Dim dim : {Dim{"B", B}, Dim{"M", M}, Dim{"N", N}, Dim{"K", K}}) {
    if (dim.value < 0) fail(Status::kInvalidArgument, "{} = {} is negative", dim.name, dim.value);
  }
  Dims d{};
  d.b = static_cast<std::uint64_t>(B);
  d.m = static_cast<std::uint64_t>(M);
  d.n = static_cast<std::uint64_t>(N);
  d.k = static_cast<std::uint64_t>(K);
  d.a_bytes = float_bytes({{"B", B}, {"M", M}, {"K", K}});
  d.b_bytes = batched_b ? float_bytes({{"B", B}, {"K", K}, {"N", N}})
                        : float_bytes({{"K", K}, {"N", N}});
  d.c_bytes = float_bytes({{"B", B}, {"M", M}, {"N", N}});
  return d;
}

// Every product of the family runs in the device's matmul precision (FP32 exact unless the
// client opted in: aethercl_set_matmul_precision, AETHERCL_MATMUL_PRECISION).
void enqueue_product(DeviceCall& call, GemmProblem& problem) {
  gemm::apply_compute_mode(problem, gemm::matmul_precision(call));
  enqueue_gemm(call, problem);
}

void require_inputs(void* a, void* b, void* dc) {
  if (a == nullptr) fail(Status::kInvalidArgument, "buffer_a is NULL");
  if (b == nullptr) fail(Status::kInvalidArgument, "buffer_b is NULL");
  if (dc == nullptr) fail(Status::kInvalidArgument, "buffer_dc is NULL");
}

}  // namespace

void matmul(DeviceCall& call, void* a, void* w, void* c, int B, int M, int N, int K) {
  Dims s = dims_of(B, M, N, K, false);
  BufferView a_view = call.buffer(a, "buffer_a", s.a_bytes);
  BufferView w_view = call.buffer(w, "buffer_b", s.b_bytes);
  BufferView c_view = call.buffer(c, "buffer_c", s.c_bytes);
  require_not_aliased({c, "buffer_c"}, {{a, "buffer_a"}, {w, "buffer_b"}});
  if (s.empty()) return;
  GemmProblem problem;
  problem.m = s.b * s.m;
  problem.n = s.n;
  problem.k = s.k;
  problem.a = {a_view, 0};
  problem.b = {w_view, 0};
  problem.c = {c_view, 0};
  enqueue_product(call, problem);
}

void matmul_backward(DeviceCall& call, void* a, void* w, void* dc, void* da, void* dw, int B,
                     int M, int N, int K) {
  require_inputs(a, w, dc);
  if (da == nullptr && dw == nullptr) return;  // before the dimensions: docs/ABI.md section 3.6
  Dims s = dims_of(B, M, N, K, false);
  BufferView a_view = call.buffer(a, "buffer_a", s.a_bytes);
  BufferView w_view = call.buffer(w, "buffer_b", s.b_bytes);
  BufferView dc_view = call.buffer(dc, "buffer_dc", s.c_bytes);
  auto da_view = call.optional_buffer(da, "buffer_da", s.a_bytes);
  auto dw_view = call.optional_buffer(dw, "buffer_db", s.b_bytes);
  require_not_aliased({da, "buffer_da"},
                      {{a, "buffer_a"}, {w, "buffer_b"}, {dc, "buffer_dc"}, {dw, "buffer_db"}});
  require_not_aliased({dw, "buffer_db"}, {{a, "buffer_a"}, {w, "buffer_b"}, {dc, "buffer_dc"}});
  if (s.empty()) return;
  const std::uint64_t rows = s.b * s.m;
  if (da_view) {
    // dA_flat(rows,K) = dC_flat(rows,N) @ W^T, W stored (K,N).
    GemmProblem problem;
    problem.trans_b = true;
    problem.m = rows;
    problem.n = s.k;
    problem.k = s.n;
    problem.a = {dc_view, 0};
    problem.b = {w_view, 0};
    problem.c = {*da_view, 0};
    enqueue_product(call, problem);
  }
  if (dw_view) {
    // dW(K,N) = A_flat^T @ dC_flat, A_flat stored (rows,K): the batch sum is the GEMM's k loop.
    GemmProblem problem;
    problem.trans_a = true;
    problem.m = s.k;
    problem.n = s.n;
    problem.k = rows;
    problem.a = {a_view, 0};
    problem.b = {dc_view, 0};
    problem.c = {*dw_view, 0};
    enqueue_product(call, problem);
  }
}

void matmul_batched(DeviceCall& call, void* a, void* bt, void* c, int B, int M, int N, int K) {
  Dims s = dims_of(B, M, N, K, true);
  BufferView a_view = call.buffer(a, "buffer_a", s.a_bytes);
  BufferView b_view = call.buffer(bt, "buffer_b", s.b_bytes);
  BufferView c_view = call.buffer(c, "buffer_c", s.c_bytes);
  require_not_aliased({c, "buffer_c"}, {{a, "buffer_a"}, {bt, "buffer_b"}});
  if (s.empty()) return;
  GemmProblem problem;
  problem.m = s.m;
  problem.n = s.n;
  problem.k = s.k;
  problem.batch = s.b;
  problem.a = {a_view, s.m * s.k};
  problem.b = {b_view, s.k * s.n};
  problem.c = {c_view, s.m * s.n};
  enqueue_product(call, problem);
}

void matmul_batched_backward(DeviceCall& call, void* a, void* bt, void* dc, void* da, void* db,
                             int B, int M, int N, int K) {
  require_inputs(a, bt, dc);
  if (da == nullptr && db == nullptr) return;  // before the dimensions: docs/ABI.md section 3.6
  Dims s = dims_of(B, M, N, K, true);
  BufferView a_view = call.buffer(a, "buffer_a", s.a_bytes);
  BufferView b_view = call.buffer(bt, "buffer_b", s.b_bytes);
  BufferView dc_view = call.buffer(dc, "buffer_dc", s.c_bytes);
  auto da_view = call.optional_buffer(da, "buffer_da", s.a_bytes);
  auto db_view = call.optional_buffer(db, "buffer_db", s.b_bytes);
  require_not_aliased({da, "buffer_da"},
                      {{a, "buffer_a"}, {bt, "buffer_b"}, {dc, "buffer_dc"}, {db, "buffer_db"}});
  require_not_aliased({db, "buffer_db"}, {{a, "buffer_a"}, {bt, "buffer_b"}, {dc, "buffer_dc"}});
  if (s.empty()) return;
  if (da_view) {
    // dA[b](M,K) = dC[b](M,N) @ Bt[b]^T, Bt[b] stored (K,N).
    GemmProblem problem;
    problem.trans_b = true;
    problem.m = s.m;
    problem.n = s.k;
    problem.k = s.n;
    problem.batch = s.b;
    problem.a = {dc_view, s.m * s.n};
    problem.b = {b_view, s.k * s.n};
    problem.c = {*da_view, s.m * s.k};
    enqueue_product(call, problem);
  }
  if (db_view) {
    // dB[b](K,N) = A[b]^T @ dC[b], A[b] stored (M,K).
    GemmProblem problem;
    problem.trans_a = true;
    problem.m = s.k;
    problem.n = s.n;
    problem.k = s.m;
    problem.batch = s.b;
    problem.a = {a_view, s.m * s.k};
    problem.b = {dc_view, s.m * s.n};
    problem.c = {*db_view, s.k * s.n};
    enqueue_product(call, problem);
  }
}

}  // namespace aethercl::ops
