#include "compress/held_out.h"

#include <algorithm>
#include <memory>

#include "compress/post_training.h"
#include "io/safetensors.h"
#include "config/train_options.h"
#include "data/data_sources.h"
#include "util/error.h"

namespace trainlab {

HeldOutData held_out_data(Backend& be, const Config& c, const std::string& split, const std::string& path,
                          int64_t text_windows) {
  if (split != "validation" && split != "test")
    throw Error("--data must be validation (the last 20% of the training split) or test, got '" + split + "'");
  HeldOutData h;
  if (c.get_string("model.name") == "char-gpt") {
    auto text = std::make_shared<TextCorpus>(load_text_data(data_options(c)));
    const int64_t batch = c.get_int("train.batch"), windows = c.get_int("train.eval_windows");
    const auto seed = static_cast<uint64_t>(c.get_int("train.seed"));
    auto on = [&be, text, path, batch, seed](int64_t n) {
      return [&be, text, path, batch, seed, n](const SafeTensorsFile& f) {
        const TextWeightsEval e = evaluate_text_weights(be, f, path, *text, n, std::min(batch, n), seed);
        return EvalPoint{e.loss, e.accuracy};
      };
    };
    h.description = "validation: " + std::to_string(text_windows) + " windows of the text's validation split";
    h.eval = on(text_windows);
    h.test = on(windows);
    h.calibration = [text, path, seed](const SafeTensorsFile& f, int n) {
      EvalData d;
      d.text_train = &text->train;
      d.seed = seed;
      return calibration_for(f, path, d, n);
    };
    return h;
  }
  auto data = std::make_shared<TrainTestSplit>(load_classification_data(data_options(c)));
  const int64_t n = data->train.size(), hold = std::max<int64_t>(1, n / 5);
  std::vector<int64_t> rows;
  for (int64_t i = n - hold; i < n; ++i) rows.push_back(i);
  auto validation = std::make_shared<ClassificationData>(data->train.subset(rows));
  auto on = [&be, path](std::shared_ptr<const ClassificationData> d, std::shared_ptr<const TrainTestSplit> keep) {
    return [&be, path, d, keep](const SafeTensorsFile& f) {
      const WeightsEval e = evaluate_weights(be, f, path, *d);
      return EvalPoint{e.loss, e.accuracy};
    };
  };
  const int64_t batch = c.get_int("train.batch");
  h.calibration = [data, batch, n, hold](const SafeTensorsFile&, int batches) {
    // Only rows before the held-out 20 %.
    const int usable = static_cast<int>(std::min<int64_t>(batches, (n - hold) / std::max<int64_t>(1, batch)));
    return classification_calibration(data->train, batch, std::max(usable, batches > 0 ? 1 : 0));
  };
  const std::shared_ptr<const ClassificationData> test(data, &data->test);
  h.test = on(test, data);
  if (split == "test") {
    h.description = "test: the test split (" + std::to_string(data->test.size()) +
                    " samples; choosing on it selects on the test set)";
    h.eval = h.test;
  } else {
    h.description = "validation: the last 20% of the training split (" + std::to_string(hold) +
                    " samples, seen in training: optimistic, but it ranks the options without the test split)";
    h.eval = on(validation, data);
  }
  return h;
}

}  // namespace trainlab

namespace trainlab {

nlohmann::json allocation_report(Backend& be, const SafeTensorsFile& f, const std::string& path, const Config& c,
                                 const AllocateRequest& r) {
  const HeldOutData h = held_out_data(be, c, r.split, path, r.text_windows);
  SensitivityOptions o = r.options;
  o.measure_bits = r.budget.kind != BudgetKind::Sparsity;
  o.measure_sparsity = !o.measure_bits;
  r.method.validate();
  FileQuantizer quantize;
  CalibrationSet cal;
  if (r.method.method != "rtn" && o.measure_bits) {
    cal = h.calibration(f, r.calibration);
    quantize = [&](const SafeTensorsFile& fp32, const QuantPlan& plan) {
      return quantize_by_method(be, fp32, path, plan, r.method, cal, nullptr);
    };
  }
  const SensitivityTable table = measure_sensitivity(f, path, h.eval, o);
  const AllocationResult a = allocate(f, table, r.budget, h.eval, quantize);
  const SafeTensorsFile allocated = apply_allocation(f, table, a.allocated, r.budget, quantize);
  const SafeTensorsFile uniform = apply_allocation(f, table, a.uniform, r.budget, quantize);
  const EvalPoint at = h.test(allocated), ut = h.test(uniform), base = h.test(f);
  nlohmann::json out = a.to_json();
  out["weights"] = path;
  out["held_out"] = h.description;
  if (o.measure_bits) out["method"] = r.method.method;
  if (!cal.batches.empty()) out["calibration"] = cal.description;
  out["fp32_test"] = {{"loss", base.loss}, {"accuracy", base.accuracy}};
  out["allocated_test"] = {{"loss", at.loss}, {"accuracy", at.accuracy}};
  out["uniform_test"] = {{"loss", ut.loss}, {"accuracy", ut.accuracy}};
  out["sensitivity"] = table.to_json();
  if (!r.out.empty()) {
    write_safetensors(r.out, a.kept_uniform ? uniform : allocated);
    out["out"] = r.out;
  }
  return out;
}

}  // namespace trainlab
