// Linear: y = act(x W^T + b), W [out, in] as in PyTorch's nn.Linear, with an optional fused
// activation (ReLU or GELU) so that bias and activation run in the matrix product's epilogue.
// Initialisation is PyTorch's default: W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
#pragma once
#include <random>

#include "nn/flat_params.h"
#include "nn/layer.h"

namespace trainlab {

class Linear final : public Layer {
 public:
  // A layer on its own: W and b in flat buffers of their own, initialised from rng now.
  Linear(Backend& be, int64_t in, int64_t out, Activation act, bool bias, std::mt19937_64& rng);
  // A layer of a model: W and b are declared to the model's builder, which places them in the
  // model's flat buffers and draws their initial values from rng at finish() (rng must live
  // until then; no other draws may come in between, to keep the per-layer draw order).
  Linear(FlatParamsBuilder& params, int64_t in, int64_t out, Activation act, bool bias, std::mt19937_64& rng);
  std::string type() const override { return "linear"; }
  Tensor forward(Backend& be, const Tensor& x, bool training) override;
  Tensor backward(Backend& be, Tensor& dy, bool need_dx, bool accumulate) override;
  std::vector<Parameter*> parameters() override;
  void release_buffers() override;

  int64_t in_features() const { return m_in; }
  int64_t out_features() const { return m_out; }
  Activation activation() const { return m_act; }
  Parameter& weight() { return m_w; }
  Parameter* bias() { return m_has_bias ? &m_b : nullptr; }

 private:
  void declare(FlatParamsBuilder& params, std::mt19937_64& rng);

  int64_t m_in, m_out;
  Activation m_act;
  bool m_has_bias;
  Parameter m_w, m_b;
  Tensor m_x;             // saved input
  Tensor m_y, m_pre, m_dx;// reused buffers
};

class ActivationLayer final : public Layer {
 public:
  explicit ActivationLayer(Activation act) : m_act(act) {}
  std::string type() const override { return activation_name(m_act); }
  Tensor forward(Backend& be, const Tensor& x, bool training) override;
  Tensor backward(Backend& be, Tensor& dy, bool need_dx, bool accumulate) override;
  void release_buffers() override;

 private:
  Activation m_act;
  Tensor m_x, m_y, m_dx;
};

// Uniform in [-bound, bound) from 24 random bits (portable: the same numbers on every platform).
float uniform_pm(std::mt19937_64& rng, float bound);

}  // namespace trainlab
