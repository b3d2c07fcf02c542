// The fused FP8 casts: one op computes the amax, the scale and the float8
// data (and, for the backward's GEMMs, the transposed copy), where eager code
// takes three to five ops and as many passes over memory.
//
//   musa_fp8::cast_tensorwise(x, dtype, transpose, power_of_2, scale?) -> (data, data_t, scale, inv_scale)
//   musa_fp8::cast_rowwise(x, dtype, power_of_2) -> (data, scale, inv_scale)   (one scale per row)
// inv_scale = 1 / scale (float32, correctly rounded) is what torch._scaled_mm takes: returning it
// saves a launch per cast.
//
// The arithmetic is fixed so every implementation gives the same bits as the
// unfused reference (torch_musa.fp8.casting.reference_*):
//   amax  = max |x|                         (NaN propagates)
//   scale = float32(fp8_max / max(float64(amax), 1e-12)), rounded down to a
//           power of two (exponent bits only) if power_of_2
//   data  = float8(clamp(float32(x) * scale, -fp8_max, fp8_max))  (round to nearest even)
// Here are the schemas, the CPU kernels (the host driver's kernel device runs
// them on musa memory through the op layer) and the Meta kernels (shapes for
// torch.compile). The cuda driver's kernels are Triton, registered for CUDA
// by torch_musa.fp8 (the op layer delegates musa calls to them).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace torch_musa::fp8 {
namespace {

using at::Tensor;
using Vec = at::vec::Vectorized<float>;
constexpr int64_t kChunk = 1024;  // elements converted to float at a time
constexpr double kMinAmax = 1e-12;

float fp8_max(c10::ScalarType t) {
  switch (t) {
    case at::kFloat8_e4m3fn: return 448.0f;
    case at::kFloat8_e5m2: return 57344.0f;
    default: TORCH_CHECK_VALUE(false, "musa_fp8: float8_dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got ", t);
  }
}

void check_input(const Tensor& x, const char* op) {
  TORCH_CHECK_VALUE(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf,
              "musa_fp8::", op, ": the input must be float32, bfloat16 or float16, got ", x.scalar_type());
}

float scale_from_amax(float amax, float max, bool power_of_2) {
  float s = std::isnan(amax) ? amax : static_cast<float>(double(max) / std::max(double(amax), kMinAmax));
  if (power_of_2 && std::isfinite(s) && s > 0) {
    uint32_t bits;
    std::memcpy(&bits, &s, 4);
    bits &= 0xFF800000u;  // keep sign and exponent: the power of two at or below s
    std::memcpy(&s, &bits, 4);
  }
  return s;
}

float combine_amax(float a, float b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }

template <typename in_t>
void to_float(const in_t* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i]);
}

// max |x[0..n)|, NaN if any element is NaN.
template <typename in_t>
float amax_of(const in_t* x, int64_t n) {
  alignas(64) float buf[kChunk];
  Vec acc(0.0f);
  float tail = 0.0f;
  for (int64_t base = 0; base < n; base += kChunk) {
    int64_t len = std::min(kChunk, n - base);
    to_float(x + base, buf, len);
    int64_t i = 0;
    for (; i + Vec::size() <= len; i += Vec::size()) acc = at::vec::maximum(acc, Vec::loadu(buf + i).abs());
    for (; i < len; ++i) {
      float a = std::abs(buf[i]);
      tail = (std::isnan(a) || a > tail) ? a : tail;
    }
  }
  alignas(64) float lanes[Vec::size()];
  acc.store(lanes);
  float m = tail;
  for (float l : lanes) m = combine_amax(m, l);
  return m;
}

template <typename in_t>
float parallel_amax(const in_t* x, int64_t n) {
  return at::parallel_reduce(
      0, n, 1 << 16, 0.0f, [&](int64_t b, int64_t e, float ident) { return combine_amax(ident, amax_of(x + b, e - b)); },
      combine_amax);
}

// y[i] = float8(clamp(float(x[i]) * scale)) for a contiguous run.
template <typename in_t, typename out_t>
void cast_run(const in_t* x, out_t* y, int64_t n, float scale, float max) {
  alignas(64) float buf[kChunk];
  const Vec vs(scale), vhi(max), vlo(-max);
  for (int64_t base = 0; base < n; base += kChunk) {
    int64_t len = std::min(kChunk, n - base);
    to_float(x + base, buf, len);
    int64_t i = 0;
    for (; i + Vec::size() <= len; i += Vec::size())
      at::vec::minimum(at::vec::maximum(Vec::loadu(buf + i) * vs, vlo), vhi).store(buf + i);
    for (; i < len; ++i) {
      float v = buf[i] * scale;
      buf[i] = std::isnan(v) ? v : std::min(std::max(v, -max), max);
    }
    for (int64_t j = 0; j < len; ++j) y[base + j] = static_cast<out_t>(buf[j]);
  }
}

template <typename out_t>
void transpose_2d(const out_t* y, out_t* yt, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  at::parallel_for(0, (rows + kTile - 1) / kTile, 1, [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t)
      for (int64_t c0 = 0; c0 < cols; c0 += kTile)
        for (int64_t r = t * kTile; r < std::min(rows, (t + 1) * kTile); ++r)
          for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) yt[c * rows + r] = y[r * cols + c];
  });
}

template <typename in_t, typename out_t>
void tensorwise_kernel(const Tensor& x, Tensor& data, Tensor& data_t, float scale, float max, bool transpose) {
  const in_t* px = x.const_data_ptr<in_t>();
  out_t* py = data.mutable_data_ptr<out_t>();
  at::parallel_for(0, x.numel(), 1 << 15, [&](int64_t b, int64_t e) { cast_run(px + b, py + b, e - b, scale, max); });
  if (transpose) transpose_2d(py, data_t.mutable_data_ptr<out_t>(), data_t.size(1), data_t.size(0));
}

template <typename in_t, typename out_t>
void rowwise_kernel(const Tensor& x, Tensor& data, Tensor& scale, float max, bool power_of_2) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const in_t* px = x.const_data_ptr<in_t>();
  out_t* py = data.mutable_data_ptr<out_t>();
  float* ps = scale.mutable_data_ptr<float>();
  at::parallel_for(0, rows, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(cols, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      ps[r] = scale_from_amax(amax_of(px + r * cols, cols), max, power_of_2);
      cast_run(px + r * cols, py + r * cols, cols, ps[r], max);
    }
  });
}

// Calls fn<in_t, out_t>() for the input and float8 dtypes.
template <typename Fn>
void dispatch(c10::ScalarType in, c10::ScalarType out, Fn&& fn) {
  auto with_out = [&](auto in_tag) {
    using in_t = decltype(in_tag);
    if (out == at::kFloat8_e4m3fn) fn(in_t{}, c10::Float8_e4m3fn{});
    else fn(in_t{}, c10::Float8_e5m2{});
  };
  if (in == at::kFloat) with_out(float{});
  else if (in == at::kBFloat16) with_out(c10::BFloat16{});
  else with_out(c10::Half{});
}

Tensor empty_t(const Tensor& x, c10::ScalarType dtype, bool transpose) {
  if (!transpose) return at::empty({0}, x.options().dtype(dtype));
  return at::empty({x.size(-1), x.numel() / std::max<int64_t>(x.size(-1), 1)}, x.options().dtype(dtype));
}

void check_tensorwise(const Tensor& x, c10::ScalarType dtype, bool transpose, const std::optional<Tensor>& scale) {
  check_input(x, "cast_tensorwise");
  fp8_max(dtype);
  TORCH_CHECK_VALUE(!transpose || x.dim() >= 1, "musa_fp8::cast_tensorwise: transpose=True needs at least 1 dimension");
  TORCH_CHECK_VALUE(!scale || (scale->numel() == 1 && scale->scalar_type() == at::kFloat),
              "musa_fp8::cast_tensorwise: a given scale must be a float32 tensor of one element, got ",
              scale ? scale->sizes() : at::IntArrayRef{}, " ", scale ? scale->scalar_type() : at::kFloat);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> cast_tensorwise_cpu(const Tensor& x_in, c10::ScalarType dtype, bool transpose,
                                                       bool power_of_2, const std::optional<Tensor>& given) {
  check_tensorwise(x_in, dtype, transpose, given);
  const Tensor x = x_in.contiguous();
  const float max = fp8_max(dtype);
  Tensor data = at::empty(x.sizes(), x.options().dtype(dtype));
  Tensor data_t = empty_t(x, dtype, transpose);
  Tensor scale = at::empty({}, x.options().dtype(at::kFloat));
  Tensor inv = at::empty({}, x.options().dtype(at::kFloat));
  dispatch(x.scalar_type(), dtype, [&](auto in_tag, auto out_tag) {
    using in_t = decltype(in_tag);
    using out_t = decltype(out_tag);
    const float s = given ? given->to(at::kCPU).item<float>()
                          : scale_from_amax(parallel_amax(x.const_data_ptr<in_t>(), x.numel()), max, power_of_2);
    *scale.mutable_data_ptr<float>() = s;
    *inv.mutable_data_ptr<float>() = 1.0f / s;
    tensorwise_kernel<in_t, out_t>(x, data, data_t, s, max, transpose);
  });
  return {data, data_t, scale, inv};
}

std::tuple<Tensor, Tensor, Tensor> cast_rowwise_cpu(const Tensor& x_in, c10::ScalarType dtype, bool power_of_2) {
  check_input(x_in, "cast_rowwise");
  TORCH_CHECK_VALUE(x_in.dim() == 2, "musa_fp8::cast_rowwise: the input must be 2-D, got ", x_in.dim(), " dimensions");
  const Tensor x = x_in.contiguous();
  const float max = fp8_max(dtype);
  Tensor data = at::empty(x.sizes(), x.options().dtype(dtype));
  Tensor scale = at::empty({x.size(0), 1}, x.options().dtype(at::kFloat));
  dispatch(x.scalar_type(), dtype, [&](auto in_tag, auto out_tag) {
    rowwise_kernel<decltype(in_tag), decltype(out_tag)>(x, data, scale, max, power_of_2);
  });
  return {data, scale, at::reciprocal(scale)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> cast_tensorwise_meta(const Tensor& x, c10::ScalarType dtype,
                                                                bool transpose, bool,
                                                                const std::optional<Tensor>& given) {
  check_tensorwise(x, dtype, transpose, given);
  return {at::empty(x.sizes(), x.options().dtype(dtype)), empty_t(x, dtype, transpose),
          at::empty({}, x.options().dtype(at::kFloat)), at::empty({}, x.options().dtype(at::kFloat))};
}

std::tuple<Tensor, Tensor, Tensor> cast_rowwise_meta(const Tensor& x, c10::ScalarType dtype, bool) {
  check_input(x, "cast_rowwise");
  fp8_max(dtype);
  TORCH_CHECK_VALUE(x.dim() == 2, "musa_fp8::cast_rowwise: the input must be 2-D, got ", x.dim(), " dimensions");
  return {at::empty(x.sizes(), x.options().dtype(dtype)), at::empty({x.size(0), 1}, x.options().dtype(at::kFloat)),
          at::empty({x.size(0), 1}, x.options().dtype(at::kFloat))};
}

}  // namespace

TORCH_LIBRARY(musa_fp8, m) {
  m.def("cast_tensorwise(Tensor x, ScalarType float8_dtype, bool transpose=False, bool power_of_2=False, "
        "Tensor? scale=None) -> (Tensor data, Tensor data_t, Tensor scale, Tensor inv_scale)");
  m.def("cast_rowwise(Tensor x, ScalarType float8_dtype, bool power_of_2=False) -> (Tensor data, Tensor scale, Tensor inv_scale)");
}

TORCH_LIBRARY_IMPL(musa_fp8, CPU, m) {
  m.impl("cast_tensorwise", TORCH_FN(cast_tensorwise_cpu));
  m.impl("cast_rowwise", TORCH_FN(cast_rowwise_cpu));
}

TORCH_LIBRARY_IMPL(musa_fp8, Meta, m) {
  m.impl("cast_tensorwise", TORCH_FN(cast_tensorwise_meta));
  m.impl("cast_rowwise", TORCH_FN(cast_rowwise_meta));
}

}  // namespace torch_musa::fp8
