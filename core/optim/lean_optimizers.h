// The lean optimizers of issue 19, over the same flat parameters as AdamW (optim/optimizer.h):
//   Lion       one momentum in the M buffer (fp32, or bf16 with optim.lion_state), sign updates;
//   AdamW8bit  bitsandbytes' block-wise 8-bit AdamW: m and v as 8-bit dynamic codes with one fp32
//              absmax per block of optim.block_size elements of a parameter (blocks start at each
//              parameter's first element); optim.stable_embedding keeps embeddings' m, v in fp32
//              (the M and V buffers, updated by the ordinary AdamW step);
//   Adafactor  factored second moment (row and column averages) for parameters of >= 2 rows and
//              >= 2 columns (the last dimension is the columns), a full one for the others; the
//              first moment in M when optim.adafactor_beta1 > 0.
// The 8-bit codes, the absmax scales and Adafactor's averages are optimizer-owned buffers (one each,
// the parameters' parts end to end), counted as optimizer memory; plan/memory_model.h's
// optimizer_state_bytes predicts every byte. Each is built for the parameter list of its first
// step; a step over another list throws Error (ZeRO's shards are refused before that, in
// train/distributed.cpp).
#pragma once
#include <memory>

#include "optim/optimizer.h"

namespace trainlab {

class Lion final : public Optimizer {
 public:
  Lion(LionHyper h, DType state) : m_h(h), m_dtype(state) {}
  std::string name() const override { return "lion"; }
  Op backend_op() const override { return Op::Lion; }
  void step(Backend& be, std::vector<Parameter*>& params) override;
  std::vector<ParamBuffer> state_buffers() const override { return {ParamBuffer::M}; }
  DType state_dtype() const override { return m_dtype; }
  const LionHyper& hyper() const { return m_h; }

 private:
  LionHyper m_h;
  DType m_dtype;
};

class AdamW8bit final : public Optimizer {
 public:
  AdamW8bit(AdamWHyper h, int block, bool stable_embedding) : m_h(h), m_block(block), m_stable(stable_embedding) {}
  std::string name() const override { return "adamw8bit"; }
  Op backend_op() const override { return Op::AdamW8bit; }
  void step(Backend& be, std::vector<Parameter*>& params) override;
  std::vector<ParamBuffer> state_buffers() const override { return {}; }
  int block() const { return m_block; }

 protected:
  std::vector<std::string> state_names() const override { return {"m_code", "v_code", "m_absmax", "v_absmax", "m", "v"}; }
  void create_state(Backend& be, const std::vector<Parameter*>& params) override;
  std::vector<StateView> state_views(const std::vector<Parameter*>& params) const override;

 private:
  bool full_precision(const Parameter& p) const { return m_stable && p.embedding; }
  AdamWHyper m_h;
  int m_block;
  bool m_stable;
  std::vector<Parameter*> m_params;       // the list the state was made for
  std::vector<size_t> m_quantized;        // indices into m_params of the 8-bit parameters
  std::vector<Tensor> m_views;            // per 8-bit parameter: m_code, v_code, m_absmax, v_absmax
  std::vector<Quant8State> m_state;       // pointers into m_views
};

class Adafactor final : public Optimizer {
 public:
  explicit Adafactor(AdafactorHyper h) : m_h(h) {}
  std::string name() const override { return "adafactor"; }
  Op backend_op() const override { return Op::Adafactor; }
  void step(Backend& be, std::vector<Parameter*>& params) override;
  std::vector<ParamBuffer> state_buffers() const override { return {}; }
  const AdafactorHyper& hyper() const { return m_h; }

 protected:
  std::vector<std::string> state_names() const override { return {"v", "m"}; }
  void create_state(Backend& be, const std::vector<Parameter*>& params) override;
  std::vector<StateView> state_views(const std::vector<Parameter*>& params) const override;

 private:
  AdafactorHyper m_h;
  std::vector<Parameter*> m_params;
  std::vector<Tensor> m_views;  // per parameter: row, col (factored) or v, then (beta1 > 0) nothing: m is Parameter::m
  std::vector<FactoredState> m_state;
};

// Whether Adafactor factors a parameter of this shape, and its rows and columns when it does
// (rows = numel / last dimension, cols = last dimension, both >= 2).
bool adafactor_factors(const Shape& shape, int64_t& rows, int64_t& cols);

// adamw8bit, adafactor or lion from o (null for another name).
std::unique_ptr<Optimizer> make_lean_optimizer(const OptimizerOptions& o);

}  // namespace trainlab
