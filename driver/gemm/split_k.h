// Split-K for products whose work-groups would leave the device idle and that have a long k
// (weight gradients such as llm.py's dW = A^T dC, 16 x 16 over k = 1024; decode-like 16 x 8192
// x 8192): k is cut into slices, one batched GEMM writes a partial product per slice and a fold
// adds them in slice order.
#pragma once

#include "gemm/gemm.h"
#include "gemm/params.h"

#include <functional>

namespace aethercl::gemm {

// Whether p can run as k slices at all: a single product (the slices are run as one batch) that
// does not read C (beta 0: the fold writes C).
inline bool k_splittable(const GemmProblem& p) { return p.batch == 1 && p.beta == 0.0f; }

// How many k slices p should run as (1: none) when whole it would run as `groups` work-groups of
// `group_items` work-items: on devices that run the GPU kernel forms, for batch-1, beta-0 products
// whose work-groups hold fewer items than kItemsPerUnit per compute unit, enough
// slices to reach that, each of at least kMinSliceK (and of k_multiple) elements of k, with no
// more partial products than the operands hold elements.
std::uint64_t split_k_slices(Device& device, const GemmProblem& p, std::uint64_t groups,
                             std::uint64_t group_items, std::uint64_t k_multiple = 1);
// The same for the portable kernel with the parameters it was chosen with.
std::uint64_t split_k_slices(Device& device, const GemmProblem& p, const GemmParams& params);

// Runs one product of slices (a batch of them into scratch) for enqueue_split_k.
using SliceProduct = std::function<void(DeviceCall& call, const GemmProblem& slice)>;

// Enqueues p (k_splittable) as `slices` k slices of k / slices rounded down to k_multiple (one
// batched product into float32 scratch, through `product` or else enqueue_gemm, plus one product
// for the rest of k) and their fold into C in slice order, rounded once to C's type. The
// partial products are an optional workspace: where they do not fit, half as many slices are
// tried, down to two; false (nothing enqueued) when not even those fit, and the caller runs p
// unsplit.
[[nodiscard]] bool enqueue_split_k(DeviceCall& call, const GemmProblem& p, std::uint64_t slices,
                     std::uint64_t k_multiple = 1, const SliceProduct& product = {});

}  // namespace aethercl::gemm
