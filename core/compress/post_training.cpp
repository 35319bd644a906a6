#include "compress/post_training.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "compress/compression.h"
#include "nn/transformer.h"
#include "util/error.h"

namespace trainlab {

CalibrationSet calibration_for(const SafeTensorsFile& f, const std::string& path, const EvalData& data, int n) {
  if (n <= 0) return {};
  if (data.classes) return classification_calibration(data.classes->train, std::max<int64_t>(1, data.batch), n);
  if (!data.text_train) throw Error(path + ": no training data to calibrate on");
  const auto arch = f.metadata.find("trainlab_architecture");
  if (arch == f.metadata.end()) throw Error(path + ": no trainlab_architecture metadata: the model's context is unknown");
  const int64_t context = architecture_int(Json::parse(arch->second), "context", 1, int64_t{1} << 20);
  return text_calibration(*data.text_train, context, n, data.seed);
}

Json quantize_report(Backend& be, const SafeTensorsFile& f, const std::string& path, const PtqOptions& o, const EvalData& data) {
  if (is_quantized_file(f)) throw Error(path + " is already quantized: give the fp32 weights of a run");
  o.method.validate();
  QuantFileReport rep;
  const QuantPlan plan = QuantPlan::parse(o.spec, o.overrides);
  const CalibrationSet cal = o.method.method == "rtn" ? CalibrationSet{} : calibration_for(f, path, data, o.calibration);
  SafeTensorsFile q;
  Json method;
  try {
    q = quantize_by_method(be, f, path, plan, o.method, cal, &rep, &method);
  } catch (const Error& e) {  // a weight that cannot be quantized (a NaN; a group for its shape); no calibration
    throw Error(path + ": " + e.what());
  }
  Json out = {{"weights", path}, {"spec", o.spec.to_json()}, {"fp32_bytes", tensor_bytes(f)}};
  out["method"] = o.method.method;
  if (cal.samples > 0) out["calibration"] = cal.description;
  out["method_report"] = method;
  if (data.text_val) {  // the character model: validation loss of both files on the run's validation split
    const int64_t windows = o.val_windows, batch = std::min<int64_t>(windows, 32);
    out["val_windows"] = windows;
    out["fp32_val_loss"] = file_text_val_loss(be, f, *data.text_val, windows, batch, data.seed);
    out["val_loss"] = file_text_val_loss(be, q, *data.text_val, windows, batch, data.seed);
  } else if (data.classes) {
    out["fp32_test_accuracy"] = file_accuracy(be, f, data.classes->test);
    out["test_accuracy"] = file_accuracy(be, q, data.classes->test);
  }
  if (!o.out.empty()) {
    write_safetensors(o.out, q);
    rep.file_bytes = static_cast<int64_t>(std::filesystem::file_size(o.out));
    out["out"] = o.out;
  }
  out["storage"] = rep.to_json();
  out["model_bytes"] = rep.model_bytes;
  out["bits_per_weight"] = rep.bits_per_weight();
  if (o.w8a8) {
    auto m = model_from_file(be, f, path);
    auto* mlp = dynamic_cast<Mlp*>(m.get());
    if (!mlp || !data.classes) throw Error("--w8a8 needs a digits MLP weights file (the character model has no W8A8 path)");
    W8A8Mlp w8(be, *mlp, data.classes->train, data.batch, o.calibration_batches);
    out["w8a8_test_accuracy"] = w8.accuracy(be, data.classes->test);
    out["w8a8_weight_bytes"] = w8.weight_bytes();
    out["w8a8_activation_scales"] = w8.activation_scales();
  }
  return out;
}

namespace {

// Prunes `pruned` in place by the method; a structured prune returns the smaller MLP (and records
// its size and accuracy in `out`).
std::unique_ptr<Mlp> prune_model(Backend& be, Model& pruned, const PruneFileOptions& o, const TrainTestSplit& data, Json& out) {
  auto ps = prunable_parameters(pruned);
  if (o.method == "magnitude") {
    apply_masks(be, ps, magnitude_masks(download_masters(be, ps), o.sparsity, o.global_scope ? PruneScope::Global : PruneScope::Layer));
  } else if (o.method == "2:4") {
    auto ws = download_masters(be, ps);
    std::vector<std::vector<float>> masks;
    for (size_t i = 0; i < ps.size(); ++i) masks.push_back(mask_2_4(ws[i], ps[i]->shape[0], ps[i]->shape[1]));
    apply_masks(be, ps, masks);
  } else if (o.method == "structured") {
    auto* pm = dynamic_cast<Mlp*>(&pruned);
    if (!pm) throw Error("structured pruning needs an MLP");
    const StructuredPlan plan = plan_structured(be, *pm, o.sparsity);
    auto small = build_structured(be, *pm, plan);
    apply_structured_masks(be, *pm, plan);
    out["structured_sizes"] = small->sizes();
    out["structured_test_accuracy"] = model_accuracy(be, *small, data.test);
    out["structured_bytes"] = small->parameter_count() * 4;
    return small;
  } else {
    throw Error("unknown pruning method '" + o.method + "': expected magnitude, 2:4 or structured");
  }
  return nullptr;
}

}  // namespace

Json prune_report(Backend& be, const SafeTensorsFile& f, const std::string& path, const PruneFileOptions& o,
                  const TrainTestSplit& data) {
  auto dense = model_from_file(be, f, path);
  Json out = {{"weights", path}, {"method", o.method}};
  out["dense_test_accuracy"] = model_accuracy(be, *dense, data.test);
  auto pruned = model_from_file(be, f, path);
  std::unique_ptr<Mlp> small = prune_model(be, *pruned, o, data, out);
  out["test_accuracy"] = model_accuracy(be, *pruned, data.test);
  // Speed, measured interleaved (5 rounds of each model in turn, the best round's median) so that
  // a busy machine affects them alike.
  std::vector<Model*> timed = {dense.get(), pruned.get()};
  if (small) timed.push_back(small.get());
  std::vector<double> best(timed.size(), 1e30);
  for (int round = 0; round < 5; ++round)
    for (size_t i = 0; i < timed.size(); ++i) best[i] = std::min(best[i], time_forward_ms(be, *timed[i], o.rows, 15));
  out["dense_forward_ms"] = best[0];
  out["masked_dense_forward_ms"] = best[1];
  if (small) out["structured_forward_ms"] = best[2];
  out["sparsity"] = sparsity_report(be, *pruned).to_json();
  if (!o.out.empty()) {
    // The run's config travels with the pruned weights (the data they are measured on), as stored.
    SafeTensorsFile w = model_to_file(be, small ? static_cast<Model&>(*small) : *pruned);
    if (auto it = f.metadata.find("trainlab_config"); it != f.metadata.end()) w.metadata["trainlab_config"] = it->second;
    write_safetensors(o.out, w);
    out["out"] = o.out;
  }
  return out;
}

WeightsEval evaluate_weights(Backend& be, const SafeTensorsFile& f, const std::string& path, const ClassificationData& test) {
  auto model = model_from_file(be, f, path);
  const int64_t n = test.size(), batch = std::min<int64_t>(256, n);
  if (n == 0) throw Error(path + ": the test split is empty");
  Tensor x = be.empty({n, test.features}, DType::F32, MemCategory::Workspace);
  be.upload(x, test.x.data(), DType::F32);
  Tensor y = be.empty({n}, DType::I32, MemCategory::Workspace);
  be.upload(y, test.y.data(), DType::I32);
  Tensor idx = be.empty({batch}, DType::I32, MemCategory::Workspace);
  Tensor xb = be.empty({batch, test.features}, DType::F32, MemCategory::Activations);
  Tensor yb = be.empty({batch}, DType::I32, MemCategory::Activations);
  Tensor acc = be.empty({2}, DType::F32, MemCategory::Workspace);
  for (int64_t b = 0; b < n; b += batch) {
    const int64_t rows = std::min(batch, n - b);
    // Always a full batch (the model's buffers are reused); rows past the end repeat the chunk's
    // first row and are left out of the statistics.
    std::vector<int32_t> ix(static_cast<size_t>(batch), static_cast<int32_t>(b));
    for (int64_t i = 0; i < rows; ++i) ix[static_cast<size_t>(i)] = static_cast<int32_t>(b + i);
    be.upload(idx, ix.data(), DType::I32);
    be.gather_rows(x, idx, xb);
    be.gather_rows(y, idx, yb);
    Tensor logits = model->forward(be, xb, false);
    be.softmax_xent(logits.slice_rows(0, rows), yb.slice_rows(0, rows), nullptr, 1.0f, acc, b != 0);
  }
  float st[2];
  be.download(acc, st, DType::F32);
  return {n, st[1] / static_cast<double>(n), st[0] / static_cast<double>(n)};
}

TextWeightsEval evaluate_text_weights(Backend& be, const SafeTensorsFile& f, const std::string& path, const TextCorpus& text,
                                      int64_t windows, int64_t batch, uint64_t seed) {
  auto model = model_from_file(be, f, path);
  const auto* gpt = dynamic_cast<const CharGpt*>(model.get());
  if (!gpt) throw Error(path + ": not a char-gpt weights file: a validation loss over text needs the character model");
  const CharGptConfig& cfg = gpt->config();
  if (text.vocab() != cfg.vocab || (!cfg.chars.empty() && text.chars_utf8() != cfg.chars))
    throw Error(path + ": the model's vocabulary (" + std::to_string(cfg.vocab) + " characters) is not the text's (" +
                std::to_string(text.vocab()) + " characters): give the text the run trained on (--set data.path=FILE)");
  const int64_t T = cfg.context;
  if (windows < 1 || batch < 1) throw Error(path + ": evaluation needs at least one window and a batch of at least one");
  if (text.val.window_count(T) <= 0)
    throw Error(path + ": the validation split holds no window of " + std::to_string(T + 1) + " characters");
  // The trainer's validation windows (train/task.cpp TextTask): the same seeded generator.
  std::mt19937_64 vr(seed * 1000003ULL + 11);
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < windows; ++i) starts.push_back(text.val.random_window(vr, T));
  const std::vector<int32_t>& tok = text.val.tokens;
  Tensor x = be.empty({batch, T}, DType::I32, MemCategory::Workspace);
  Tensor y = be.empty({batch * T}, DType::I32, MemCategory::Workspace);
  Tensor acc = be.empty({2}, DType::F32, MemCategory::Workspace);
  std::vector<int32_t> xs(static_cast<size_t>(batch * T)), ys(xs.size());
  for (int64_t b0 = 0; b0 < windows; b0 += batch) {
    // Always a full batch, as the trainer's; windows past `rows` repeat the chunk's first one and
    // are left out of the statistics.
    const int64_t rows = std::min(batch, windows - b0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const auto s0 = static_cast<size_t>(starts[static_cast<size_t>(b0 + (b < rows ? b : 0))] + t);
        xs[static_cast<size_t>(b * T + t)] = tok[s0];
        ys[static_cast<size_t>(b * T + t)] = tok[s0 + 1];
      }
    be.upload(x, xs.data(), DType::I32);
    be.upload(y, ys.data(), DType::I32);
    Tensor logits = model->forward(be, x, false);
    be.softmax_xent(logits.slice_rows(0, rows * T), y.slice_rows(0, rows * T), nullptr, 1.0f, acc, b0 != 0);
  }
  float st[2];
  be.download(acc, st, DType::F32);
  const auto n = static_cast<double>(windows * T);
  return {windows, windows * T, st[0] / n, st[1] / n};
}

}  // namespace trainlab
