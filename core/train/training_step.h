// TrainingStep: one optimizer step on the device with no host synchronisation: gather k
// micro-batches from the resident data set by index, forward, fused softmax + cross-entropy,
// backward (gradients accumulated over the micro-batches, loss scaled by 1/k), optimizer update.
// The trainer (train/trainer.h) drives it and reads the loss back; the benchmark runs it bare.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"
#include "optim/optimizer.h"

namespace trainlab {

class PipelineExecutor;

class TrainingStep {
 public:
  // `data_x` [n, features] fp32 and `data_y` [n] int32 live on the backend.
  TrainingStep(Backend& be, Model& model, Optimizer& opt, Tensor data_x, Tensor data_y, int64_t batch, int accumulate);
  // Token windows (the character model): `tokens` int32 [n] on the backend; a micro-batch is
  // `batch` windows of `ctx` inputs, labels the next token. Indices (set_indices) are then one per
  // input token, k * batch * ctx of them: window start + position; labels are read at index + 1.
  TrainingStep(Backend& be, Model& model, Optimizer& opt, Tensor tokens, int64_t batch, int64_t ctx, int accumulate);

  // Uploads the step's k*batch sample indices (host ints) to the device.
  void set_indices(const std::vector<int32_t>& idx);
  // Forward and backward over the k micro-batches (no optimizer update). Stats accumulate
  // {sum of losses, correct} over the micro-batches into stats().
  void forward_backward();
  // forward_backward and the optimizer update, as one capturable unit.
  void full_step();
  // full_step through Backend::run_step under `key` (captured as one graph where the backend can);
  // an optimizer whose step waits on the host (Optimizer::host_step: offload) runs outside the
  // capture, after forward_backward's.
  void run_full_step(const std::string& key);
  // Evaluates rows [begin, end) of an (x, y) data set with the training buffers; returns
  // {loss sum, correct} accumulated into `acc`.
  void eval_rows(const Tensor& x, const Tensor& y, int64_t begin, int64_t end, Tensor& acc, bool first);
  // Token mode: evaluates windows starting at `starts` (at most batch of them) of `tokens`;
  // {loss sum over their tokens, correct} accumulated into `acc`.
  void eval_windows(const Tensor& tokens, const std::vector<int64_t>& starts, Tensor& acc, bool first);
  // Input positions per sample: 1 for classification, ctx for token windows.
  int64_t tokens_per_sample() const { return m_ctx > 0 ? m_ctx : 1; }

  void set_accumulate(int k);
  // Data parallelism over `ranks` ranks (core/dist): this step computes `batch` of each
  // micro-batch's batch * ranks samples, and the loss gradient is divided by the global batch, so
  // that the sum of the ranks' gradients is the global batch's.
  void set_ranks(int ranks) { m_ranks = ranks; }
  // Pipeline parallelism (dist.pp, token windows only): forward_backward gathers the step's
  // micro-batches and runs this stage's part of the schedule through `exec` (the loss sums land in
  // stats() on the last stage only, zero elsewhere); eval_windows sends the windows forward
  // through the stages (their sums on the last stage). Null: the model is whole.
  void set_pipeline(PipelineExecutor* exec);
  // Call after the model's compute format changed: re-creates the batch buffers.
  void on_format_changed();
  std::vector<Parameter*>& params() { return m_params; }
  Tensor& stats() { return m_stats; }
  int64_t batch() const { return m_batch; }
  int accumulate() const { return m_k; }

 private:
  void ensure_buffers();
  void micro_batch(const Tensor& x_src, const Tensor& y_src, const Tensor& idx, bool first_micro, bool train);

  Backend& m_be;
  Model& m_model;
  Optimizer& m_opt;
  Tensor m_data_x, m_data_y;
  int64_t m_batch;
  int m_k;
  std::vector<Parameter*> m_params;
  Tensor m_idx;       // int32 [k * batch]
  Tensor m_eval_idx;  // int32 [batch]
  Tensor m_x32, m_x;  // gathered batch (fp32) and its compute-format copy
  Tensor m_y;         // int32 [batch]
  Tensor m_dlogits;
  Tensor m_stats;     // fp32 [2]
  int64_t m_ctx = 0;  // token mode: window length (0: classification)
  int m_ranks = 1;    // data-parallel ranks sharing each micro-batch
  Tensor m_tok_x;     // token mode: int32 [batch * ctx, 1] inputs
  PipelineExecutor* m_pipeline = nullptr;
  std::vector<Tensor> m_pipe_x, m_pipe_y;  // pipeline: each micro-batch's tokens and labels
};

}  // namespace trainlab
