// Loss op family (docs/ABI.md section 4.6): stable log-softmax, cross-entropy loss and gradient.
#pragma once

#include "runtime/device_call.h"

namespace aethercl::ops {

// out = (x - max) - ln(sum exp(x - max) + 1e-9) over B*S rows of V logits.
void log_softmax(DeviceCall& call, void* logits, void* log_probs, int B, int S, int V);
// grad = exp(lp) - onehot(target), loss = -lp[target]; a target outside [0, V) gives loss 0 and a
// gradient row of plain probabilities. targets are int32 (B*S).
void cross_entropy(DeviceCall& call, void* log_probs, void* targets, void* grad, void* loss, int B,
                   int S, int V);

}  // namespace aethercl::ops
