// Makes a CUDA context current on the calling thread for a scope and restores the one that was
// current before (a caller's own CUDA work, e.g. PyTorch's, keeps its context).
#pragma once

#include "vendor/cuda_driver.h"

namespace aethercl::vendor {

class CurrentContext {
 public:
  explicit CurrentContext(const CudaDriver& cuda) : cuda_(cuda) {
    if (cuda_.cuCtxGetCurrent(&previous_) != kCudaSuccess) previous_ = nullptr;
  }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;
  ~CurrentContext() { cuda_.cuCtxSetCurrent(previous_); }

  // Throws Error naming cuCtxSetCurrent on failure.
  void set(CUcontext context) const {
    cuda_check(cuda_, cuda_.cuCtxSetCurrent(context), "cuCtxSetCurrent", "vendor engine call");
  }

 private:
  const CudaDriver& cuda_;
  CUcontext previous_ = nullptr;
};

}  // namespace aethercl::vendor
