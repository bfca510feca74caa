// aethercl_optimizer_step_multi: every descriptor validated first (messages name descs[i]), then
// the updates in launches of up to kSlots tensors each (kernel optim_multi in kernels/optim.cl),
// whatever their kinds; the per-element arithmetic is the one-tensor kernels' own.
#include "ops/aliasing.h"
#include "ops/train/common.h"
#include "ops/train/optim.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace aethercl::ops::train {
namespace {

constexpr int kMaxDescriptors = 65536;
// A descriptor array's stride is its struct_size; a newer header may grow the struct, but not
// past this (it bounds how far a wrong struct_size can make the call read).
constexpr std::size_t kMaxStructSize = 4096;
constexpr int kSlots = 8;             // OPTIM_MULTI_SLOTS
constexpr std::uint64_t kAlign = 16;  // each tensor's range of items starts on a multiple of this

// Mirrors struct optim_multi_table of kernels/optim.cl, passed by value.
struct OptimMultiTable {
  cl_ulong first[kSlots + 1];
  cl_ulong count[kSlots];
  cl_float hyper[kSlots * 6];
  cl_int mode[kSlots];
};
static_assert(sizeof(OptimMultiTable) == 360, "layout of optim_multi_table in kernels/optim.cl");

// Reads descs[i] with the array's stride (descs[0].struct_size); every element must carry the
// same struct_size, at least the version-3 size (fields past a shorter size stay zero).
std::vector<aethercl_optimizer_desc> read_descs(const aethercl_optimizer_desc* descs, int count) {
  std::vector<aethercl_optimizer_desc> out(static_cast<std::size_t>(count));
  if (count == 0) return out;
  std::size_t stride = 0;
  std::memcpy(&stride, descs, sizeof stride);
  if (stride < kOptimizerDescV3Size || stride > kMaxStructSize) {
    fail(Status::kInvalidArgument, "descs[0].struct_size = {} must lie in [{}, {}] (it is the "
         "array's stride)", stride, kOptimizerDescV3Size, kMaxStructSize);
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(descs);
  for (int i = 0; i < count; ++i) {
    const unsigned char* at = bytes + static_cast<std::size_t>(i) * stride;
    std::size_t size = 0;
    std::memcpy(&size, at, sizeof size);
    if (size != stride) {
      fail(Status::kInvalidArgument, "descs[{}].struct_size = {} differs from descs[0]"
           ".struct_size = {} (the array's stride)", i, size, stride);
    }
    std::memcpy(&out[static_cast<std::size_t>(i)], at,
                std::min(stride, sizeof(aethercl_optimizer_desc)));
  }
  return out;
}

// In-order semantics would let a later descriptor read an earlier one's writes; the launches run
// the tensors concurrently, so a buffer a step writes (param, state) may belong to one descriptor
// only. A gradient or a gate is only read: several descriptors may share one (autograd hands one
// gradient buffer to two parameters of x + y).
void refuse_shared_buffers(const std::vector<PreparedStep>& steps) {
  std::map<const void*, std::pair<std::size_t, int>> owner;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    for (int f = 0; f < kStepFieldCount; ++f) {
      const void* handle = steps[i].handles[f];
      if (handle == nullptr) continue;
      auto [it, inserted] = owner.emplace(handle, std::make_pair(i, f));
      if (inserted) continue;
      if (step_field_read_only(f) && step_field_read_only(it->second.second)) continue;
      fail(Status::kInvalidArgument, "descs[{}].{} ({}) is also descs[{}].{}: a buffer an update "
           "writes may belong to one descriptor only", i, kStepFields[f], handle,
           it->second.first, kStepFields[it->second.second]);
    }
  }
}

// One launch over steps[begin, end) (at most kSlots, none empty).
void launch_group(DeviceCall& call, const std::vector<const PreparedStep*>& steps,
                  std::size_t begin, std::size_t end) {
  const UpdateKernels kernels = update_kernels(call.device());
  OptimMultiTable table{};
  cl_mem mems[kSlots][kStepFieldCount];  // gate: grad when ungated (not read)
  std::uint64_t next = 0;
  for (int k = 0; k < kSlots; ++k) {
    const std::size_t index = begin + static_cast<std::size_t>(k);
    table.first[k] = next;
    if (index < end) {
      const PreparedStep& s = *steps[index];
      table.count[k] = s.count;
      table.mode[k] = update_mode(s);
      for (int h = 0; h < 6; ++h) table.hyper[k * 6 + h] = s.hyper[h];
      mems[k][0] = s.param;
      mems[k][1] = s.grad;
      mems[k][2] = s.state1;
      mems[k][3] = s.state2;
      mems[k][4] = s.gate != nullptr ? s.gate : s.grad;
      const std::uint64_t items = (s.count + kernels.per_item - 1) / kernels.per_item;
      next += (items + kAlign - 1) / kAlign * kAlign;
    } else {
      // An empty slot: any valid buffer stands in, the kernel never touches it.
      for (cl_mem& mem : mems[k]) mem = steps[begin]->param;
    }
  }
  table.first[kSlots] = next;
  Kernel& kernel = named_kernel(call, kernels.family, "optim_multi");
  call.launch(kernel, linear_geometry(call.device(), kernel, next),
              mems[0][0], mems[0][1], mems[0][2], mems[0][3], mems[0][4], mems[1][0], mems[1][1],
              mems[1][2], mems[1][3], mems[1][4], mems[2][0], mems[2][1], mems[2][2], mems[2][3],
              mems[2][4], mems[3][0], mems[3][1], mems[3][2], mems[3][3], mems[3][4], mems[4][0],
              mems[4][1], mems[4][2], mems[4][3], mems[4][4], mems[5][0], mems[5][1], mems[5][2],
              mems[5][3], mems[5][4], mems[6][0], mems[6][1], mems[6][2], mems[6][3], mems[6][4],
              mems[7][0], mems[7][1], mems[7][2], mems[7][3], mems[7][4], table);
}

}  // namespace

void optimizer_step_multi(DeviceCall& call, const aethercl_optimizer_desc* descs, int count) {
  if (count < 0 || count > kMaxDescriptors) {
    fail(Status::kInvalidArgument, "count = {} must lie in [0, {}]", count, kMaxDescriptors);
  }
  if (count > 0 && descs == nullptr) {
    fail(Status::kInvalidArgument, "descs is NULL with count = {}", count);
  }
  const std::vector<aethercl_optimizer_desc> copies = read_descs(descs, count);
  std::vector<PreparedStep> steps;
  steps.reserve(copies.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    steps.push_back(prepare_step(call, copies[i], fmt::format("descs[{}]", i)));
  }
  refuse_shared_buffers(steps);
  std::vector<const PreparedStep*> work;
  for (const PreparedStep& s : steps) {
    if (s.count > 0) work.push_back(&s);
  }
  for (std::size_t begin = 0; begin < work.size(); begin += kSlots) {
    launch_group(call, work, begin, std::min(work.size(), begin + kSlots));
  }
}

}  // namespace aethercl::ops::train
