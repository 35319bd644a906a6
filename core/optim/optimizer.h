// Optimizers over a model's parameters. State (fp32, counted as optimizer memory) is created on
// the first step, as PyTorch does, so the first step's memory differs from the later ones.
// Each state tensor (AdamW's m and v, SGD's momentum buffer) is one flat buffer over the
// parameters of the first step, in their order: given model.parameters(), the state lies at the
// model's flat offsets (FlatParams), so a ZeRO shard of it is a range. The update itself is the
// backend's multi-tensor step over the per-parameter views (per-parameter decay flags and masks).
// save_state/load_state carry that state across a checkpoint (train/run_checkpoint.h); the step
// count t is the trainer's (StepScalars::step), not the optimizer's.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/optim_options.h"
#include "nn/flat_params.h"

namespace trainlab {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  // One update of every parameter; lr, step count and gradient unscale come from the backend's
  // StepScalars.
  virtual void step(Backend& be, std::vector<Parameter*>& params) = 0;
  // Bytes of state per parameter (for the memory prediction).
  virtual int state_bytes_per_param() const = 0;
  // The parameter buffers that hold this optimizer's state (AdamW: M and V; SGD: M with momentum).
  virtual std::vector<ParamBuffer> state_buffers() const = 0;

  // Host copies of the state, one fp32 vector per state buffer named by param_buffer_name ("m",
  // "v"), laid out at the FlatParams offsets of `params`; empty before the first step created it.
  std::map<std::string, std::vector<float>> save_state(Backend& be, const std::vector<Parameter*>& params) const;
  // Puts saved state back (creating the buffers as the first step would). Throws Error naming the
  // buffer when a name is not one of state_buffers(), one is missing, or a size is not the
  // parameters' element count.
  void load_state(Backend& be, const std::vector<Parameter*>& params,
                  const std::map<std::string, std::vector<float>>& state);

 protected:
  // (Not named "slots": that is a Qt keyword macro, and the app and the tests include this header.)
  std::vector<ParamSlot> param_slots(std::vector<Parameter*>& params);
  // Parameters without state for `which` (M or V) get fp32 zeros, all in one new buffer.
  static void ensure_state(Backend& be, const std::vector<Parameter*>& params, ParamBuffer which);
};

class AdamW final : public Optimizer {
 public:
  explicit AdamW(AdamWHyper h) : m_h(h) {}
  std::string name() const override { return "adamw"; }
  void step(Backend& be, std::vector<Parameter*>& params) override;
  int state_bytes_per_param() const override { return 8; }
  std::vector<ParamBuffer> state_buffers() const override { return {ParamBuffer::M, ParamBuffer::V}; }
  const AdamWHyper& hyper() const { return m_h; }

 private:
  AdamWHyper m_h;
};

class Sgd final : public Optimizer {
 public:
  explicit Sgd(SgdHyper h) : m_h(h) {}
  std::string name() const override { return "sgd"; }
  void step(Backend& be, std::vector<Parameter*>& params) override;
  int state_bytes_per_param() const override { return m_h.momentum != 0.0f ? 4 : 0; }
  std::vector<ParamBuffer> state_buffers() const override {
    return m_h.momentum != 0.0f ? std::vector<ParamBuffer>{ParamBuffer::M} : std::vector<ParamBuffer>{};
  }
  const SgdHyper& hyper() const { return m_h; }

 private:
  SgdHyper m_h;
};

// The optimizer named by o.name with o's hyper-parameters (rounded to fp32, as the backend's
// steps take them); throws Error naming the known optimizers for an unknown name.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o);

}  // namespace trainlab
