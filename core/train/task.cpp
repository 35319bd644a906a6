#include "train/task.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "data/text.h"
#include "io/weights.h"
#include "nn/transformer.h"
#include "plan/memory_model.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab {

namespace {

// An integer field of a data state in [lo, hi]; Error naming the field otherwise.
long state_int(const Json& state, const char* field, double lo, double hi) {
  const auto it = state.is_object() ? state.find(field) : state.end();
  const bool integral = it != state.end() && it->is_number() &&
                        (it->is_number_integer() || std::floor(it->get<double>()) == it->get<double>());
  if (!integral || !(it->get<double>() >= lo && it->get<double>() <= hi)) {
    char range[64];
    std::snprintf(range, sizeof range, "[%.0f, %.0f]", lo, hi);
    throw Error(std::string("data state: ") + field + ": expected an integer in " + range);
  }
  return static_cast<long>(it->get<double>());
}

// Rows of features and a class each: seeded permutations per epoch, drop-last batches.
class ClassificationTask final : public Task {
 public:
  ClassificationTask(const ModelOptions& m, const DataOptions& d, const TrainOptions& t)
      : m_data(load_classification_data(d)), m_seed(t.seed) {
    const int64_t need = t.batch * t.accumulate;
    if (m_data.train.size() < need)
      throw Error("train.batch x train.accumulate = " + std::to_string(need) + " is larger than the training split (" +
                  std::to_string(m_data.train.size()) + " samples)");
    m_sizes = {m_data.train.features};
    for (auto h : m.hidden) m_sizes.push_back(h);
    if (m.name == "digits-mlp") m_sizes = {m_data.train.features, 256, 256};
    m_sizes.push_back(m_data.train.classes);
    m_activation = m.activation;
  }

  std::unique_ptr<Model> build_model(Backend& be, uint64_t seed) override {
    return trainlab::build_model(be, {{"kind", "mlp"}, {"sizes", m_sizes}, {"activation", m_activation}}, seed);
  }

  std::unique_ptr<TrainingStep> make_step(Backend& be, Model& model, Optimizer& opt, int64_t batch,
                                          int accumulate) override {
    upload(be, m_data.train, m_train_x, m_train_y);
    upload(be, m_data.test, m_test_x, m_test_y);
    m_perm = seeded_permutation(train_units(), m_seed * 1000003ULL + 1);
    m_cursor = 0;
    return std::make_unique<TrainingStep>(be, model, opt, m_train_x, m_train_y, batch, accumulate);
  }

  int64_t train_units() const override { return m_data.train.size(); }
  int64_t units_per_sample() const override { return 1; }
  int64_t data_bytes() const override {
    return static_cast<int64_t>(m_train_x.bytes() + m_train_y.bytes() + m_test_x.bytes() + m_test_y.bytes());
  }

  void next_indices(int64_t samples, std::vector<int32_t>& idx) override {
    if (m_cursor + static_cast<size_t>(samples) > m_perm.size()) {  // drop-last, new epoch
      ++m_epoch;
      m_perm = seeded_permutation(train_units(), m_seed * 1000003ULL + 1 + static_cast<uint64_t>(m_epoch));
      m_cursor = 0;
    }
    idx.assign(m_perm.begin() + static_cast<long>(m_cursor), m_perm.begin() + static_cast<long>(m_cursor + samples));
    m_cursor += static_cast<size_t>(samples);
  }
  // Fractional epochs by batches: with drop-last an epoch is (n / samples) whole steps.
  double epoch(int64_t samples) const override {
    return static_cast<double>(m_epoch) +
           static_cast<double>(m_cursor) / static_cast<double>((train_units() / samples) * samples);
  }
  bool end_of_epoch(int64_t samples) const override { return m_cursor + static_cast<size_t>(samples) > m_perm.size(); }

  Json data_state() const override { return {{"epoch", m_epoch}, {"cursor", m_cursor}}; }
  void restore_data_state(const Json& state) override {
    const long epoch = state_int(state, "epoch", 0, 1e15);
    const long cursor = state_int(state, "cursor", 0, static_cast<double>(train_units()));
    if (state.size() != 2) throw Error("data state of a classification run: expected exactly epoch and cursor");
    m_epoch = epoch;
    m_perm = seeded_permutation(train_units(), m_seed * 1000003ULL + 1 + static_cast<uint64_t>(m_epoch));
    m_cursor = static_cast<size_t>(cursor);
  }

  void evaluate(Backend& be, TrainingStep& step, int64_t batch, double& loss, double& accuracy) override {
    Tensor acc_t = step.stats();  // reuse the stats buffer; training stats were read already
    const int64_t n = m_data.test.size();
    for (int64_t b = 0; b < n; b += batch) step.eval_rows(m_test_x, m_test_y, b, std::min(n, b + batch), acc_t, b == 0);
    float st[2];
    be.download(acc_t, st, DType::F32);
    loss = st[0] / static_cast<double>(n);
    accuracy = st[1] / static_cast<double>(n);
  }

  double flops_per_sample(Model& model) override { return mlp_train_flops_per_sample(model.parameter_count()); }
  int64_t activation_bytes(int64_t batch, int64_t eb, bool) const override {
    return mlp_activation_bytes(m_sizes, batch, eb, m_activation == "gelu");
  }
  std::vector<LinearShape> linear_shapes(int64_t batch) const override {
    return mlp_linear_shapes(m_sizes, batch, m_activation == "gelu");
  }

 private:
  static void upload(Backend& be, const ClassificationData& d, Tensor& x, Tensor& y) {
    x = be.empty({d.size(), d.features}, DType::F32, MemCategory::Workspace);
    be.upload(x, d.x.data(), DType::F32);
    y = be.empty({d.size()}, DType::I32, MemCategory::Workspace);
    be.upload(y, d.y.data(), DType::I32);
  }

  TrainTestSplit m_data;
  uint64_t m_seed;
  std::vector<int64_t> m_sizes;
  std::string m_activation;
  Tensor m_train_x, m_train_y, m_test_x, m_test_y;
  std::vector<int64_t> m_perm;
  size_t m_cursor = 0;
  long m_epoch = 0;
};

// Token windows of a character corpus: random training windows from a seeded stream, a fixed
// seeded set of validation windows scored on every token. An epoch is as many tokens as the
// training split holds.
// The char-gpt of compress.init_from (a run folder or a weights file; no file: an empty config):
// fine-tuning keeps its vocabulary.
CharGptConfig base_architecture(const std::string& init_from) {
  if (init_from.empty()) return CharGptConfig{};
  const std::string path = weights_file_of(init_from);
  const SafeTensorsFile f = read_safetensors(path);
  const WeightsMetadata meta = validate_weights_metadata(f, path);
  if (!meta.architecture.is_object() || meta.architecture.value("kind", "") != "char-gpt")
    throw Error("compress.init_from " + path + ": not a char-gpt's weights (kind '" +
                (meta.architecture.is_object() ? meta.architecture.value("kind", "") : std::string()) +
                "'; this run's model is char-gpt)");
  return CharGptConfig::from_json(meta.architecture);
}

std::string shape_text(const CharGptConfig& c) {
  return std::to_string(c.layers) + " layers x " + std::to_string(c.heads) + " heads x dim " + std::to_string(c.dim) +
         ", context " + std::to_string(c.context) + (c.pad_vocab ? ", padded vocabulary" : "");
}

// The run's model against the base it starts from: Error naming both shapes.
void check_base_shape(const CharGptConfig& run, const CharGptConfig& base, const std::string& init_from) {
  if (run.layers == base.layers && run.heads == base.heads && run.dim == base.dim && run.context == base.context &&
      run.pad_vocab == base.pad_vocab)
    return;
  throw Error("compress.init_from " + weights_file_of(init_from) + " is a char-gpt of " + shape_text(base) +
              "; this run's model is " + shape_text(run) + " (set model.preset or model.layers/heads/dim/context to "
              "the base's shape)");
}

class TextTask final : public Task {
 public:
  TextTask(const ModelOptions& m, const DataOptions& d, const TrainOptions& t, const CheckpointOptions& ck)
      : m_base(base_architecture(m.init_from)), m_corpus(load_text_data(d, m_base.chars.empty() ? nullptr : &m_base.chars)),
        m_seed(t.seed), m_eval_windows(t.eval_windows), m_checkpoint(ck) {
    m_cfg = CharGptConfig::preset(m.preset);
    if (m.layers > 0) m_cfg.layers = m.layers;
    if (m.heads > 0) m_cfg.heads = m.heads;
    if (m.dim > 0) m_cfg.dim = m.dim;
    if (m.context > 0) m_cfg.context = m.context;
    m_cfg.pad_vocab = m.pad_vocab;
    m_cfg.dropout = m.dropout;
    if (!m.init_from.empty()) check_base_shape(m_cfg, m_base, m.init_from);
    m_cfg.vocab = m_corpus.vocab();
    m_cfg.chars = m_corpus.chars_utf8();
    m_cfg.validate();
    m_ctx = m_cfg.context;
    if (m_corpus.val.window_count(m_ctx) <= 0 || m_corpus.train.window_count(m_ctx) <= 0)
      throw Error("model.context " + std::to_string(m_ctx) + " is longer than a text chunk (" + std::to_string(kTextChunk) +
                  " characters)");
  }

  std::unique_ptr<Model> build_model(Backend& be, uint64_t seed) override {
    auto gpt = std::make_unique<CharGpt>(be, m_cfg, seed, m_tp, m_slice);
    m_gpt = gpt.get();
    set_checkpointing(m_checkpoint);
    return gpt;
  }

  std::unique_ptr<TrainingStep> make_step(Backend& be, Model& model, Optimizer& opt, int64_t batch,
                                          int accumulate) override {
    upload(be, m_corpus.train, m_train_tok);
    upload(be, m_corpus.val, m_val_tok);
    auto step = std::make_unique<TrainingStep>(be, model, opt, m_train_tok, batch, m_ctx, accumulate);
    m_window_rng.seed(m_seed * 1000003ULL + 7);
    std::mt19937_64 vr(m_seed * 1000003ULL + 11);
    for (int64_t i = 0; i < m_eval_windows; ++i) m_val_starts.push_back(m_corpus.val.random_window(vr, m_ctx));
    return step;
  }

  int64_t train_units() const override { return static_cast<int64_t>(m_corpus.train.tokens.size()); }
  int64_t units_per_sample() const override { return m_ctx; }
  int64_t data_bytes() const override { return static_cast<int64_t>(m_train_tok.bytes() + m_val_tok.bytes()); }

  // Random windows: one index per input token (window start + position).
  void next_indices(int64_t samples, std::vector<int32_t>& idx) override {
    idx.resize(static_cast<size_t>(samples * m_ctx));
    for (int64_t w = 0; w < samples; ++w) {
      const int64_t start = m_corpus.train.random_window(m_window_rng, m_ctx);
      for (int64_t t = 0; t < m_ctx; ++t) idx[static_cast<size_t>(w * m_ctx + t)] = static_cast<int32_t>(start + t);
    }
    m_tokens_seen += static_cast<double>(samples * m_ctx);
  }
  double epoch(int64_t) const override { return m_tokens_seen / static_cast<double>(train_units()); }

  Json data_state() const override {
    std::ostringstream rng;
    rng << m_window_rng;
    return {{"window_rng", rng.str()}, {"tokens_seen", m_tokens_seen}};
  }
  void restore_data_state(const Json& state) override {
    const auto rng = state.is_object() ? state.find("window_rng") : state.end();
    if (rng == state.end() || !rng->is_string() || state.size() != 2)
      throw Error("data state of a text run: expected window_rng (text) and tokens_seen");
    const double seen = static_cast<double>(state_int(state, "tokens_seen", 0, 9e15));
    std::istringstream in(rng->get<std::string>());
    std::mt19937_64 g;
    in >> g;
    if (in.fail() || !(in >> std::ws).eof())
      throw Error("data state of a text run: window_rng is not a generator state");
    m_window_rng = g;
    m_tokens_seen = seen;
  }
  bool end_of_epoch(int64_t samples) const override {
    const double n = static_cast<double>(train_units());
    return std::floor(m_tokens_seen / n) > std::floor((m_tokens_seen - static_cast<double>(samples * m_ctx)) / n);
  }

  // The fixed validation windows, every token scored.
  void evaluate(Backend& be, TrainingStep& step, int64_t batch, double& loss, double& accuracy) override {
    Tensor acc_t = step.stats();
    const int64_t nw = static_cast<int64_t>(m_val_starts.size());
    for (int64_t b = 0; b < nw; b += batch) {
      std::vector<int64_t> chunk(m_val_starts.begin() + b, m_val_starts.begin() + std::min(nw, b + batch));
      step.eval_windows(m_val_tok, chunk, acc_t, b == 0);
    }
    float st[2];
    be.download(acc_t, st, DType::F32);
    loss = st[0] / static_cast<double>(nw * m_ctx);
    accuracy = st[1] / static_cast<double>(nw * m_ctx);
  }

  double flops_per_sample(Model&) override { return char_gpt_train_flops_per_token(*m_gpt, m_ctx); }
  int64_t activation_bytes(int64_t batch, int64_t eb, bool fp8_matmul) const override {
    return char_gpt_activation_bytes(*m_gpt, batch, m_ctx, eb, fp8_matmul) + token_step_activation_bytes(batch, m_ctx);
  }
  std::vector<LinearShape> linear_shapes(int64_t batch) const override {
    return char_gpt_linear_shapes(m_cfg, m_cfg.layers, true, batch, m_ctx);
  }
  void set_tensor_parallel(const TensorParallel& tp) override { m_tp = tp; }
  void set_pipeline_slice(const PipelineSlice& slice) override { m_slice = slice; }
  void set_checkpointing(const CheckpointOptions& ck) override {
    m_checkpoint = ck;
    if (m_gpt) m_gpt->set_checkpointing(checkpoint_policy_from_name(ck.policy), ck.k);
  }

 private:
  static void upload(Backend& be, const TokenSplit& t, Tensor& x) {
    x = be.empty({static_cast<int64_t>(t.tokens.size())}, DType::I32, MemCategory::Workspace);
    be.upload(x, t.tokens.data(), DType::I32);
  }

  CharGptConfig m_base;  // compress.init_from's architecture (empty without one)
  TextCorpus m_corpus;
  uint64_t m_seed;
  int64_t m_eval_windows;
  CheckpointOptions m_checkpoint;
  CharGptConfig m_cfg;
  PipelineSlice m_slice;  // the whole model unless a pipeline stage
  int64_t m_ctx = 0;
  CharGpt* m_gpt = nullptr;  // owned by the trainer (through the model it runs)
  TensorParallel m_tp;
  Tensor m_train_tok, m_val_tok;
  std::mt19937_64 m_window_rng;
  std::vector<int64_t> m_val_starts;
  double m_tokens_seen = 0.0;
};

}  // namespace

std::unique_ptr<Task> make_task(const ModelOptions& model, const DataOptions& data, const TrainOptions& train,
                                const CheckpointOptions& checkpoint) {
  if (model.name == "char-gpt") return std::make_unique<TextTask>(model, data, train, checkpoint);
  return std::make_unique<ClassificationTask>(model, data, train);
}

}  // namespace trainlab
