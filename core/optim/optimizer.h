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
  friend class OffloadedOptimizer;  // runs another optimizer's protected state hooks on host copies
  virtual std::string name() const = 0;
  // One update of every parameter; lr, step count and gradient unscale come from the backend's
  // StepScalars.
  virtual void step(Backend& be, std::vector<Parameter*>& params) = 0;
  // The parameter buffers that hold this optimizer's state (AdamW: M and V; SGD: M with momentum;
  // Lion: M); empty for optimizers whose state is not per element (adamw8bit, adafactor), which
  // therefore cannot be sharded by ZeRO (train/distributed.cpp refuses the combination).
  virtual std::vector<ParamBuffer> state_buffers() const = 0;
  // The backend operation its step needs (the trainer asks Backend::supports before a run).
  virtual Op backend_op() const = 0;
  // The format of the state_buffers() (fp32 but for Lion's bf16 momentum).
  virtual DType state_dtype() const { return DType::F32; }
  // Called once a step's parameters are final (TrainingStep's constructor), before any update.
  virtual void attach(Backend& be, const std::vector<Parameter*>& params) {}
  // True when step() waits on the host (optim/offload.h): the step cannot be captured as a graph
  // and the device's own optimizer operation is not needed.
  virtual bool host_step() const { return false; }

  // Host copies of the state, one fp32 vector per state array, each laid out at the FlatParams
  // offsets of `params` (numel() values; a parameter's state may be shorter than the parameter,
  // e.g. 8-bit AdamW's block scales or Adafactor's row and column averages, and then fills the
  // start of its range); 8-bit codes are saved as their values 0..255. Empty before the first step.
  std::map<std::string, std::vector<float>> save_state(Backend& be, const std::vector<Parameter*>& params) const;
  // Puts saved state back (creating the state as the first step would). Throws Error naming the
  // array when a name is not one of state_names(), one is missing, a size is not the parameters'
  // element count, or an 8-bit code is not an integer in 0..255.
  void load_state(Backend& be, const std::vector<Parameter*>& params,
                  const std::map<std::string, std::vector<float>>& state);

 protected:
  // One parameter's part of one saved state array.
  struct StateView {
    std::string name;
    size_t param = 0;  // index into params
    Tensor tensor;     // fp32, bf16 or I8 codes
    int64_t at = 0;    // its first element's place in the parameter's range
  };
  // The names of the saved state arrays (default: param_buffer_name of each state buffer).
  virtual std::vector<std::string> state_names() const;
  // Creates the state as the first step does (default: zeros in each state buffer).
  virtual void create_state(Backend& be, const std::vector<Parameter*>& params);
  // The state's tensors, empty when not created yet (default: each parameter's state buffers).
  virtual std::vector<StateView> state_views(const std::vector<Parameter*>& params) const;
  // (Not named "slots": that is a Qt keyword macro, and the app and the tests include this header.)
  std::vector<ParamSlot> param_slots(std::vector<Parameter*>& params);
  // Parameters without state for `which` (M or V) get zeros in `dtype`, all in one new buffer.
  static void ensure_state(Backend& be, const std::vector<Parameter*>& params, ParamBuffer which,
                           DType dtype = DType::F32);
};

class AdamW final : public Optimizer {
 public:
  explicit AdamW(AdamWHyper h) : m_h(h) {}
  std::string name() const override { return "adamw"; }
  Op backend_op() const override { return Op::AdamW; }
  void step(Backend& be, std::vector<Parameter*>& params) override;
  std::vector<ParamBuffer> state_buffers() const override { return {ParamBuffer::M, ParamBuffer::V}; }
  const AdamWHyper& hyper() const { return m_h; }

 private:
  AdamWHyper m_h;
};

class Sgd final : public Optimizer {
 public:
  explicit Sgd(SgdHyper h) : m_h(h) {}
  std::string name() const override { return "sgd"; }
  Op backend_op() const override { return Op::Sgd; }
  void step(Backend& be, std::vector<Parameter*>& params) override;
  std::vector<ParamBuffer> state_buffers() const override {
    return m_h.momentum != 0.0f ? std::vector<ParamBuffer>{ParamBuffer::M} : std::vector<ParamBuffer>{};
  }
  const SgdHyper& hyper() const { return m_h; }

 private:
  SgdHyper m_h;
};

// The optimizer named by o.name with o's hyper-parameters (rounded to fp32, as the backend's
// steps take them; adamw8bit, adafactor and lion are in optim/lean_optimizers.h); throws Error
// naming the known optimizers for an unknown name. With o.offload "cpu" it is wrapped in an
// OffloadedOptimizer (optim/offload.h). The state's bytes are predicted by
// plan/memory_model.h's optimizer_state_bytes.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& o);

}  // namespace trainlab
