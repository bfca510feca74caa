// The GEMM engine: one tiled, register-blocked kernel family (kernels/gemm.cl) behind every
// matrix product (docs/ARCHITECTURE.md decisions 6 and 18), with the tensor-core kernels
// (gemm/tensor_core_gemm.h) taking the products they can run where the device has them.
#pragma once

#include "runtime/device_call.h"
#include "runtime/launch.h"

#include <cstdint>
#include <string>

namespace aethercl::gemm {

// How an operand is stored (the kernels' GEMM_AB_TYPE / GEMM_C_TYPE codes).
enum class GemmStorage : int { kF32 = 0, kF16 = 1, kBF16 = 2 };
// What the inputs are rounded to before they are multiplied (kernels/gemm.cl GEMM_ROUND).
enum class GemmRounding : int { kNone = 0, kTF32 = 1, k3xTF32 = 2, kBF16 = 3, kFP16 = 4 };

std::uint64_t storage_bytes(GemmStorage storage);
const char* storage_name(GemmStorage storage);
const char* rounding_name(GemmRounding rounding);

struct GemmOperand {
  BufferView buffer;
  std::uint64_t batch_stride = 0;  // elements between consecutive batches; 0 broadcasts
  std::uint64_t offset = 0;        // elements before the first one
  std::uint64_t ld = 0;            // elements between rows as stored; 0: dense (the row length)
  GemmStorage storage = GemmStorage::kF32;
};

// The fused epilogue of aethercl_gemm_fused (kernels/gemm_epilogue.cl), applied in the store of
// C on every kernel path: C = act(alpha * op(A) op(B) + beta * C + bias[column]) with the value
// before act optionally stored to `pre` (C's layout and storage from element pre_offset).
struct GemmEpilogue {
  int kind = 0;  // 0 none; 1..7 as aethercl_gemm_epilogue::kind (GEMM_EPILOGUE)
  BufferView bias;  // kinds 1-4; mem NULL otherwise
  std::uint64_t bias_offset = 0;  // elements
  GemmStorage bias_storage = GemmStorage::kF32;
  BufferView pre;  // mem NULL: not stored
  std::uint64_t pre_offset = 0;  // elements
  BufferView residual;  // mem NULL: none added
  std::uint64_t residual_offset = 0;  // elements
};

// C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] for b < batch, with float32 accumulation.
// op(A) is m x k (A stored m x k, or k x m when trans_a); op(B) is k x n (B stored k x n, or
// n x k when trans_b); C is m x n. Operands are row-major; strides, offsets and leading dimensions
// count elements. beta == 0 never reads C. The defaults are the exact float32 product of dense
// operands that the matmul family uses.
struct GemmProblem {
  bool trans_a = false;
  bool trans_b = false;
  std::uint64_t m = 0;
  std::uint64_t n = 0;
  std::uint64_t k = 0;
  std::uint64_t batch = 1;
  GemmOperand a;
  GemmOperand b;
  GemmOperand c;
  float alpha = 1.0f;
  float beta = 0.0f;
  GemmRounding rounding = GemmRounding::kNone;
  // True for the reduced-precision compute modes, which may run on tensor cores (gemm/); the
  // portable kernel then rounds as `rounding` says, which is how tensor cores round.
  bool tensor_cores = false;
  GemmEpilogue epilogue;  // kind 0: none (every product of aethercl_gemm)
};

// The build option of p's epilogue (" -DGEMM_EPILOGUE=kind"), empty without one, so kernels
// without an epilogue keep their options (and program cache keys).
std::string epilogue_options(const GemmEpilogue& epilogue);
// Appends the epilogue's kernel arguments (GEMM_EPI_ARGS) to a launch of a kernel built with
// epilogue_options; nothing without an epilogue. c: C's buffer, passed where bias or pre is
// absent (never read or written there).
void add_epilogue_args(LaunchArgs& args, const GemmEpilogue& epilogue, cl_mem c);

// The leading dimension of an operand stored rows x cols: ld, or cols when ld is 0.
std::uint64_t leading_dimension(const GemmOperand& operand, std::uint64_t cols);

// Enqueues the product (asynchronously, on the call's queue). Preconditions, checked as
// Error(kInternal) because the ops validate client arguments first: m, n and batch > 0 (k == 0
// computes C = beta * C),
// leading dimensions at least the stored row length, A and B stored alike, and every operand's
// extent (offset + (batch - 1) * stride + (rows - 1) * ld + cols elements) within its buffer.
void enqueue_gemm(DeviceCall& call, const GemmProblem& problem);

}  // namespace aethercl::gemm
