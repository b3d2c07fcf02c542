// ATen routes LSTM/GRU cells of non-CPU devices (PrivateUse1 included) to
// fused cell ops that only have CUDA kernels. These CPU kernels give the host
// driver the same ops, written with ATen ops, so nn.LSTM / nn.GRU work on
// musa without a CUDA GPU. The workspace layouts are private to each
// forward/backward pair.
#include <ATen/ATen.h>  // tensor arithmetic operators and methods
#include <torch/library.h>

namespace torch_musa {
namespace {

using at::Tensor;

Tensor add_biases(Tensor gates, const std::optional<Tensor>& b1, const std::optional<Tensor>& b2) {
  if (b1 && b1->defined()) gates = gates + *b1;
  if (b2 && b2->defined()) gates = gates + *b2;
  return gates;
}

// LSTM: workspace = activated gates [i, f, g, o].
std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                                   const Tensor& cx, const std::optional<Tensor>& input_bias,
                                                   const std::optional<Tensor>& hidden_bias) {
  auto gates = add_biases(input_gates + hidden_gates, input_bias, hidden_bias).chunk(4, 1);
  auto i = gates[0].sigmoid(), f = gates[1].sigmoid(), g = gates[2].tanh(), o = gates[3].sigmoid();
  auto cy = f * cx + i * g;
  auto hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell_backward(const std::optional<Tensor>& grad_hy,
                                                            const std::optional<Tensor>& grad_cy, const Tensor& cx,
                                                            const Tensor& cy, const Tensor& workspace, bool has_bias) {
  auto w = workspace.chunk(4, 1);
  const auto &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  auto tanh_cy = cy.tanh();
  Tensor ghy = grad_hy && grad_hy->defined() ? *grad_hy : at::zeros_like(cy);
  Tensor gcy = grad_cy && grad_cy->defined() ? *grad_cy : at::zeros_like(cy);
  auto gc = gcy + ghy * o * (1 - tanh_cy * tanh_cy);
  auto d_i = gc * g * i * (1 - i);
  auto d_f = gc * cx * f * (1 - f);
  auto d_g = gc * i * (1 - g * g);
  auto d_o = ghy * tanh_cy * o * (1 - o);
  auto grad_gates = at::cat({d_i, d_f, d_g, d_o}, 1);
  Tensor grad_bias = has_bias ? grad_gates.sum(0) : Tensor();
  return {grad_gates, gc * f, grad_bias};
}

// GRU: workspace = [r, z, input new-gate, hidden new-gate, hx].
std::tuple<Tensor, Tensor> fused_gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                          const std::optional<Tensor>& input_bias,
                                          const std::optional<Tensor>& hidden_bias) {
  auto ig = add_biases(input_gates, input_bias, std::nullopt).chunk(3, 1);
  auto hg = add_biases(hidden_gates, hidden_bias, std::nullopt).chunk(3, 1);
  auto r = (ig[0] + hg[0]).sigmoid();
  auto z = (ig[1] + hg[1]).sigmoid();
  auto n = (ig[2] + r * hg[2]).tanh();
  auto hy = n + z * (hx - n);
  return {hy, at::cat({r, z, ig[2], hg[2], hx}, 1)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fused_gru_cell_backward(const Tensor& grad_hy,
                                                                           const Tensor& workspace, bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const auto &r = w[0], &z = w[1], &in = w[2], &hn = w[3], &hx = w[4];
  auto n = (in + r * hn).tanh();
  auto grad_hx = grad_hy * z;
  auto d_n = grad_hy * (1 - z) * (1 - n * n);  // through tanh
  auto d_z = grad_hy * (hx - n) * z * (1 - z);
  auto d_r = d_n * hn * r * (1 - r);
  auto grad_input_gates = at::cat({d_r, d_z, d_n}, 1);
  auto grad_hidden_gates = at::cat({d_r, d_z, d_n * r}, 1);
  Tensor gib = has_bias ? grad_input_gates.sum(0) : Tensor();
  Tensor ghb = has_bias ? grad_hidden_gates.sum(0) : Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, gib, ghb};
}

TORCH_LIBRARY_IMPL(aten, CPU, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace
}  // namespace torch_musa
