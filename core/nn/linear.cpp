#include "nn/linear.h"

#include <cmath>

#include "util/error.h"

namespace trainlab {

Tensor& Layer::ensure(Backend& be, Tensor& buf, const Shape& shape, DType dtype) {
  if (!buf.defined() || buf.shape() != shape || buf.dtype() != dtype) {
    buf = Tensor();
    buf = be.empty(shape, dtype, MemCategory::Activations);
  }
  return buf;
}

float uniform_pm(std::mt19937_64& rng, float bound) {
  const double u = static_cast<double>(rng() >> 40) * (1.0 / 16777216.0);  // [0, 1)
  return static_cast<float>((2.0 * u - 1.0) * bound);
}

Linear::Linear(Backend& be, int64_t in, int64_t out, Activation act, bool bias, std::mt19937_64& rng)
    : m_in(in), m_out(out), m_act(act), m_has_bias(bias) {
  FlatParamsBuilder params;
  declare(params, rng);
  params.finish(be, parameters());
}

Linear::Linear(FlatParamsBuilder& params, int64_t in, int64_t out, Activation act, bool bias, std::mt19937_64& rng)
    : m_in(in), m_out(out), m_act(act), m_has_bias(bias) {
  declare(params, rng);
}

void Linear::declare(FlatParamsBuilder& params, std::mt19937_64& rng) {
  if (m_in <= 0 || m_out <= 0)
    throw Error("linear layer sizes must be positive, got " + std::to_string(m_in) + " -> " + std::to_string(m_out));
  const float bound = 1.0f / std::sqrt(static_cast<float>(m_in));
  // W's m_out * m_in draws, then b's m_out.
  auto uniform = [&rng, bound](int64_t n) {
    return [&rng, bound, n] {
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v) x = uniform_pm(rng, bound);
      return v;
    };
  };
  m_w.name = "weight";
  m_w.shape = {m_out, m_in};
  params.add(m_w, uniform(m_out * m_in));
  if (m_has_bias) {
    m_b.name = "bias";
    m_b.shape = {m_out};
    params.add(m_b, uniform(m_out));
  }
}

std::vector<Parameter*> Linear::parameters() {
  std::vector<Parameter*> out{&m_w};
  if (m_has_bias) out.push_back(&m_b);
  return out;
}

void Linear::release_buffers() {
  m_x = Tensor();
  m_y = Tensor();
  m_pre = Tensor();
  m_dx = Tensor();
}

Tensor Linear::forward(Backend& be, const Tensor& x, bool training) {
  if (x.rank() != 2 || x.dim(1) != m_in)
    throw Error("layer " + name + " expects inputs of " + std::to_string(m_in) + " features, got shape " +
                shape_str(x.shape()));
  const DType dt = m_w.value.dtype();
  Tensor& y = ensure(be, m_y, {x.dim(0), m_out}, dt);
  Tensor* pre = nullptr;
  if (m_act == Activation::GELU) pre = &ensure(be, m_pre, {x.dim(0), m_out}, dt);
  be.linear_forward(x, m_w.value, m_has_bias ? &m_b.value : nullptr, m_act, y, pre, matmul_mode);
  if (training) m_x = x;
  return y;
}

Tensor Linear::backward(Backend& be, Tensor& dy, bool need_dx, bool accumulate) {
  if (!m_x.defined()) throw Error("layer " + name + ": backward without a training forward");
  const Tensor* saved = m_act == Activation::ReLU ? &m_y : m_act == Activation::GELU ? &m_pre : nullptr;
  Tensor* dx = nullptr;
  if (need_dx) dx = &ensure(be, m_dx, m_x.shape(), m_w.value.dtype());
  be.linear_backward(m_x, m_w.value, dy, m_act, saved, m_w.grad, m_has_bias ? &m_b.grad : nullptr, dx, accumulate,
                     matmul_mode);
  return dx ? *dx : Tensor();
}

void ActivationLayer::release_buffers() {
  m_x = Tensor();
  m_y = Tensor();
  m_dx = Tensor();
}

Tensor ActivationLayer::forward(Backend& be, const Tensor& x, bool training) {
  Tensor& y = ensure(be, m_y, x.shape(), x.dtype());
  be.activation_forward(m_act, x, y);
  if (training) m_x = x;
  return y;
}

Tensor ActivationLayer::backward(Backend& be, Tensor& dy, bool need_dx, bool accumulate) {
  if (!need_dx) return Tensor();
  Tensor& dx = ensure(be, m_dx, m_x.shape(), dy.dtype());
  be.activation_backward(m_act, m_x, m_y, dy, dx);
  return dx;
}

}  // namespace trainlab
