// Adam update (docs/ABI.md section 4.9), float32, in place on p, m and v; coupled L2 weight decay.
// Contraction into fused multiply-adds is off so every step rounds as the specification's float
// expressions do.
#pragma OPENCL FP_CONTRACT OFF

// beta1_t and beta2_t are beta^t, computed by the host in double and rounded to float.
__kernel void optimizer_adam(__global float* p, __global const float* g, __global float* m,
                          __global float* v, ulong n, float lr, float beta1, float beta2,
                          float eps, float weight_decay, float beta1_t, float beta2_t) {
  const float one_minus_beta1 = 1.0f - beta1;
  const float one_minus_beta2 = 1.0f - beta2;
  const float correction1 = (1.0f - beta1_t) + 1e-9f;
  const float correction2 = (1.0f - beta2_t) + 1e-9f;
  for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
    const float param = p[i];
    float grad = g[i];
    if (weight_decay > 0.0f) grad = grad + weight_decay * param;
    const float m_new = beta1 * m[i] + one_minus_beta1 * grad;
    const float v_new = beta2 * v[i] + one_minus_beta2 * (grad * grad);
    const float m_hat = m_new / correction1;
    const float v_hat = v_new / correction2;
    m[i] = m_new;
    v[i] = v_new;
    p[i] = param - (lr * m_hat) / (sqrt(v_hat) + eps);
  }
}
