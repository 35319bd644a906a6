// Compression during training: what the trainer calls so that quantization-aware training,
// pruning schedules, lottery-ticket rewinding and distillation run from the config keys quant.*,
// prune.*, distill.* and compress.* (config_schema.cpp, compress_keys), including the mid-run
// ones (quant.mode/bits/granularity/group, prune.now), which apply at the next step.
//
// It works from plain options (config/compress_options.h), never the run's Config. The trainer's
// part is five calls:
//   Compression compression(compress_options(config), backend);
//   model = compression.attach(std::move(model), batch, accumulate);  // after the model is built
//   event += compression.before_step(step);   // before each step (pruning events, QAT switches)
//   compression.after_step();                 // after each step (re-applies fake quantization)
//   compression.on_setting(key, compress_options(config));  // when a mid-run key changed
//   compression.finish(run_dir);              // at the end: compression.json (+ quantized weights)
//
// QAT: the compute copy `value` of each linear weight holds Q(master) (fake quantization, with
// the fp32 master updated by the optimizer); the forward pass and the input gradient use Q(w) and
// the weight gradient is applied to the master unchanged: the straight-through estimator.
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compress/prune.h"
#include "compress/quant.h"
#include "data/dataset.h"
#include "data/text.h"
#include "nn/model.h"
#include "config/compress_options.h"

namespace trainlab {

// Student trained against a teacher's softened outputs (backend distill_backward): forward runs
// the teacher too when training; backward turns softmax_xent's CE gradient into the gradient of
// alpha*T^2*KL(p_t^T || p_s^T) + (1-alpha)*CE. Parameters, architecture and saved weights are the
// student's.
class DistillModel final : public Model {
 public:
  DistillModel(std::unique_ptr<Model> student, std::unique_ptr<Model> teacher, float temperature, float alpha);
  std::string kind() const override { return m_student->kind(); }
  Tensor forward(Backend& be, const Tensor& x, bool training) override;
  void backward(Backend& be, Tensor& dlogits, bool accumulate) override;
  std::vector<Parameter*> parameters() override { return m_student->parameters(); }
  void release_buffers() override;
  nlohmann::json architecture() const override { return m_student->architecture(); }
  // The teacher only evaluates (no dropout): the random state is the student's.
  nlohmann::json random_state() const override { return m_student->random_state(); }
  void set_random_state(const nlohmann::json& s) override { m_student->set_random_state(s); }
  // 1 / (batch * accumulate): the factor softmax_xent applied to the CE gradient.
  void set_grad_multiplier(float m) { m_mult = m; }
  void set_dtype(DType t) { m_dtype = t; }
  Model& student() { return *m_student; }
  Model& teacher() { return *m_teacher; }

 protected:
  // Student and teacher compute in the run's matmul mode (the teacher's forward is part of the step).
  void on_matmul_mode() override {
    m_student->set_matmul_mode(m_matmul_mode);
    m_teacher->set_matmul_mode(m_matmul_mode);
  }

 private:
  std::unique_ptr<Model> m_student, m_teacher;
  float m_t, m_alpha, m_mult = 1.0f;
  Tensor m_student_logits, m_teacher_logits;
};

class Compression {
 public:
  Compression(CompressOptions options, Backend& be);
  ~Compression();

  std::unique_ptr<Model> attach(std::unique_ptr<Model> model, int64_t batch, int accumulate);
  std::string before_step(long step);
  void after_step();
  // `key` changed mid-run; `now` holds the options after the change.
  void on_setting(const std::string& key, const CompressOptions& now);
  // When the run pruned, quantized or distilled: writes <dir>/compression.json (sparsity per layer,
  // sparse size, QAT spec, quantized size) and, with QAT on, <dir>/model.quant.safetensors (real
  // low-bit storage). Returns the JSON (empty when nothing was compressed).
  nlohmann::json finish(const std::string& dir);

  bool qat_on() const { return m_qat; }
  QuantPlan quant_plan() const;

  // A run checkpoint's part (train/run_checkpoint.h): what the options and the weights do not
  // give back: the pruning masks ("mask/<parameter>") and the lottery ticket's snapshot of the
  // masters ("rewind/<parameter>"), as fp32 host tensors.
  std::map<std::string, std::vector<float>> state_tensors() const;
  // Restores them after attach(); a prune.now of the config was applied before the checkpoint,
  // so it is not applied again. Throws Error naming a tensor that fits no parameter.
  void restore_state(const std::map<std::string, std::vector<float>>& tensors);

 private:
  void read_quant_config();
  void set_qat(bool on);
  void fake_quantize_values();
  std::string prune_to(double sparsity, const char* how);
  std::string prune_2_4();
  void rewind();

  CompressOptions m_opt;
  Backend& m_be;
  Model* m_model = nullptr;     // the model the trainer runs (maybe a DistillModel)
  DistillModel* m_distill = nullptr;
  int64_t m_batch = 1;
  std::vector<Parameter*> m_prunable;     // linear weights pruning acts on (prune.include_output)
  std::vector<Parameter*> m_quantizable;  // every linear weight (QAT)
  std::vector<std::vector<float>> m_snapshot;  // lottery ticket: masters at prune.rewind_step
  bool m_qat = false;
  QuantPlan m_plan;
  double m_pending_now = 0.0;
  bool m_requant = false;
};

// Test accuracy of a model on a data set (forward in chunks, argmax on the host).
double model_accuracy(Backend& be, Model& model, const ClassificationData& data, int64_t chunk = 512);
// Builds the model of a weights file (fp32 or quantized: dequantized) and measures its accuracy.
double file_accuracy(Backend& be, const SafeTensorsFile& f, const ClassificationData& data);
// The character model of a weights file (fp32 or quantized: dequantized): its mean next-token
// cross-entropy over `windows` fixed windows of the validation tokens (seeded, as the trainer's
// validation loss with train.seed = seed), `batch` windows per forward.
double file_text_val_loss(Backend& be, const SafeTensorsFile& f, const TokenSplit& val, int64_t windows,
                          int64_t batch, uint64_t seed);

// W8A8 inference of an MLP: int8 weights (per output channel, fp16 scales) and int8 activations
// (one scale per layer input, from the max |x| seen over calibration batches); every layer is the
// backend's int8_linear (exact int32 accumulation, one rescale).
class W8A8Mlp {
 public:
  W8A8Mlp(Backend& be, Mlp& model, const ClassificationData& calibration, int64_t batch, int batches);
  Tensor forward(Backend& be, const Tensor& x);  // fp32 logits
  double accuracy(Backend& be, const ClassificationData& data);
  int64_t weight_bytes() const;  // int8 codes + fp16 scales + fp32 biases
  const std::vector<float>& activation_scales() const { return m_x_scales; }

 private:
  struct Layer {
    Tensor wq, w_scales, bias;
    Activation act;
    int64_t in, out;
    Tensor xq, y;
  };
  std::vector<Layer> m_layers;
  std::vector<float> m_x_scales;
};

}  // namespace trainlab
