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

#include "fused_llm/fused_llm.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;

struct RopeShape {
  int64_t rows, D, R, S, inner;  // inner: rows per sequence position step
};

RopeShape check_rope(const Tensor& x, const Tensor& freq, bool batch_first, const char* op) {
  check_float_input(x, op, "the input");
  TORCH_CHECK_VALUE(freq.is_floating_point(), "musa_fused::", op, ": freq_cis must be a floating tensor, got ",
                    freq.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 4, "musa_fused::", op, ": the input must be 4-D ",
                    batch_first ? "(batch, seq, heads, dim)" : "(seq, batch, heads, dim)", ", got ", x.sizes());
  TORCH_CHECK_VALUE(freq.dim() == 2 || (freq.dim() == 4 && freq.size(1) == 1 && freq.size(2) == 1), "musa_fused::", op,
                    ": freq_cis must be (seq, rot_dim) or (seq, 1, 1, rot_dim), got ", freq.sizes());
  const int64_t S = batch_first ? x.size(1) : x.size(0);
  const int64_t R = freq.size(-1), D = x.size(3);
  TORCH_CHECK_VALUE(freq.size(0) == S, "musa_fused::", op, ": freq_cis has ", freq.size(0),
                    " positions, the input's sequence dimension ", S);
  TORCH_CHECK_VALUE(R % 2 == 0 && R <= D, "musa_fused::", op, ": freq_cis's last dimension (", R,
                    ") must be even and at most the head dimension (", D, ")");
  const int64_t inner = batch_first ? x.size(2) : x.size(1) * x.size(2);
  return {x.numel() / std::max<int64_t>(D, 1), D, R, S, inner};
}

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
