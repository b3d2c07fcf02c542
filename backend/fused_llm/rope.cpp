// RoPE's CPU kernels (host driver). Megatron's rotary embedding, as torch_musa's
// nn.RoPE: input (S, B, H, D) (batch_first: (B, S, H, D)), freq_cis the angles
// (S, R) or (S, 1, 1, R), R <= D even; the first R features of each head rotate,
// the rest pass through.
//   u = t, or with multi_latent_attention t's even features then its odd ones
//   y = u * cos(f) + rotate(u) * sin(f)
// rotate: (u1, u2) -> (-u2, u1) over the two halves, or with rotary_interleaved
// over each (even, odd) pair. In index form, y[i] = u[i] c[i] + sign(i) u[q(i)] s[i]
// with q the partner of i; the backward is the transpose:
//   du[j] = g[j] c[j] - sign(j) g[q(j)] s[q(j)],   dt[p(j)] = du[j]  (u[j] = t[p(j)]).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "fused_llm/rope.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;

// p: u[j] = t[p[j]]; q: rotate's partner; sign: rotate's sign.
void rope_maps(int64_t R, bool interleaved, bool mla, std::vector<int64_t>& p, std::vector<int64_t>& q,
               std::vector<float>& sign) {
  const int64_t h = R / 2;
  p.resize(R), q.resize(R), sign.resize(R);
  for (int64_t i = 0; i < R; ++i) {
    p[i] = mla ? (i < h ? 2 * i : 2 * (i - h) + 1) : i;
    if (interleaved) q[i] = i ^ 1, sign[i] = (i % 2 == 0) ? -1.f : 1.f;
    else q[i] = i < h ? i + h : i - h, sign[i] = i < h ? -1.f : 1.f;
  }
}

Tensor rope_cpu(const Tensor& x_in, const Tensor& freq_in, bool interleaved, bool batch_first, bool mla,
                bool backward) {
  const char* op = backward ? "_fused_rope_backward" : "_fused_rope_forward";
  const RopeShape sh = check_rope(x_in, freq_in, batch_first, op);
  const Tensor x = x_in.contiguous();
  Tensor y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  // cos/sin tables once (S x R floats), from the angles in float64 as the reference computes them.
  const Tensor f = freq_in.reshape({sh.S, sh.R}).to(at::kDouble).contiguous();
  const Tensor c = f.cos().to(at::kFloat).contiguous(), s = f.sin().to(at::kFloat).contiguous();
  const float *pc = c.const_data_ptr<float>(), *ps = s.const_data_ptr<float>();
  std::vector<int64_t> p, q;
  std::vector<float> sign;
  rope_maps(sh.R, interleaved, mla, p, q, sign);
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.const_data_ptr<T>();
    T* py = y.mutable_data_ptr<T>();
    at::parallel_for(0, sh.rows, std::max<int64_t>(1, 4096 / sh.D), [&](int64_t b, int64_t e) {
      std::vector<float> in(sh.D), out(sh.D);
      for (int64_t r = b; r < e; ++r) {
        const int64_t pos = (r / sh.inner) % sh.S;
        const float *cr = pc + pos * sh.R, *sr = ps + pos * sh.R;
        load_row(px + r * sh.D, in.data(), sh.D);
        for (int64_t j = 0; j < sh.R; ++j) {
          if (!backward) out[j] = in[p[j]] * cr[j] + sign[j] * in[p[q[j]]] * sr[j];
          else out[p[j]] = in[j] * cr[j] - sign[j] * in[q[j]] * sr[q[j]];
        }
        for (int64_t j = sh.R; j < sh.D; ++j) out[j] = in[j];
        store_row(out.data(), py + r * sh.D, sh.D);
      }
    });
  });
  return y;
}

Tensor rope_forward_cpu(const Tensor& x, const Tensor& freq, bool interleaved, bool batch_first, bool mla) {
  return rope_cpu(x, freq, interleaved, batch_first, mla, false);
}

Tensor rope_backward_cpu(const Tensor& g, const Tensor& freq, bool interleaved, bool batch_first, bool mla) {
  return rope_cpu(g, freq, interleaved, batch_first, mla, true);
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, CPU, m) {
  m.impl("_fused_rope_forward", TORCH_FN(rope_forward_cpu));
  m.impl("_fused_rope_backward", TORCH_FN(rope_backward_cpu));
}

}  // namespace torch_musa::fused_llm
