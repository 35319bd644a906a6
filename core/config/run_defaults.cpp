#include "config/run_defaults.h"

#include <algorithm>

#include "util/error.h"

namespace trainlab {

namespace {

bool is_text_model(const std::string& model) { return model == "char-gpt"; }
bool is_text_data(const std::string& data) { return data == "tinyshakespeare" || data == "kjv" || data == "text"; }

// The char-gpt presets' runs: resources/presets/char-tiny.json (1,200 steps at batch 32, rate 2e-3:
// the README's tiny run, minutes on two CPU cores) and char-small-shakespeare.json (nanoGPT's
// Shakespeare run: 5,000 steps at batch 64, 1e-3); gpt2 as GPT-2 small was trained (6e-4) at the
// batch that fits its 1024-character context on one GPU.
struct TextRun {
  const char* preset;
  int64_t steps, batch, eval_every;
  double lr;
};
constexpr TextRun kTextRuns[] = {
    {"tiny", 1200, 32, 100, 2e-3},
    {"small", 5000, 64, 250, 1e-3},
    {"gpt2", 5000, 16, 250, 6e-4},
};

const TextRun& text_run(const std::string& preset) {
  for (const TextRun& r : kTextRuns)
    if (preset == r.preset) return r;
  throw Error("model.preset '" + preset + "': expected tiny, small or gpt2");
}

// The keys that describe one kind of model only.
bool text_model_key(const std::string& key) {
  return key == "model.preset" || key == "model.layers" || key == "model.heads" || key == "model.dim" ||
         key == "model.context" || key == "model.pad_vocab" || key == "model.dropout" || key.rfind("checkpoint.", 0) == 0 ||
         key == "data.val_fraction" || key == "train.eval_windows";
}
bool mlp_model_key(const std::string& key) {
  return key == "model.hidden" || key == "model.activation" || key == "data.test_fraction";
}

void set_if_differs(Config& c, const std::string& key, const Json& v, std::vector<std::string>& changed) {
  if (c.at(key) == v) return;
  c.set_json(key, v, "the defaults of the model or optimizer");
  changed.push_back(key);
}

}  // namespace

const std::vector<std::string>& model_switch_keys() {
  static const std::vector<std::string> keys = {"data.name",  "train.epochs",     "train.steps", "train.batch",
                                                "train.eval_every", "optim.lr", "run.name"};
  return keys;
}

const std::vector<std::string>& optimizer_switch_keys() {
  static const std::vector<std::string> keys = {"optim.lr", "optim.beta1", "optim.beta2", "optim.weight_decay",
                                                "optim.relative_step"};
  return keys;
}

std::string default_run_name(const std::string& model, const std::string& preset) {
  if (model == "digits-mlp") return "digits MLP";
  if (model == "mlp") return "MLP";
  return model + " " + preset;
}

Json model_defaults(const std::string& model, const std::string& preset) {
  const Config schema;  // the schema's defaults: the MLPs' run (30 epochs at batch 64, 1e-3)
  Json d = {{"data.name", is_text_model(model) ? "tinyshakespeare" : "digits"},
            {"train.epochs", schema.at("train.epochs")},
            {"train.steps", schema.at("train.steps")},
            {"train.batch", schema.at("train.batch")},
            {"train.eval_every", schema.at("train.eval_every")},
            {"optim.lr", schema.at("optim.lr")},
            {"run.name", default_run_name(model, preset)}};
  if (is_text_model(model)) {
    const TextRun& r = text_run(preset);
    d["train.steps"] = r.steps;
    d["train.batch"] = r.batch;
    d["train.eval_every"] = r.eval_every;
    d["optim.lr"] = r.lr;
  } else if (model != "digits-mlp" && model != "mlp") {
    throw Error("model.name '" + model + "': expected digits-mlp, mlp or char-gpt");
  }
  return d;
}

double lr_factor(const std::string& optimizer) {
  if (optimizer == "lion") return 0.1;
  if (optimizer == "sgd") return 50.0;
  if (optimizer == "adamw" || optimizer == "adamw8bit" || optimizer == "adafactor") return 1.0;
  throw Error("optim.name '" + optimizer + "': expected adamw, sgd, adamw8bit, adafactor or lion");
}

Json optimizer_defaults(const std::string& optimizer, double adamw_lr, double adamw_wd) {
  const double f = lr_factor(optimizer);
  Json d = {{"optim.lr", std::min(10.0, adamw_lr * f)},  // optim.lr's range ends at 10
            {"optim.beta1", 0.9},
            {"optim.beta2", 0.999},
            {"optim.weight_decay", std::min(10.0, adamw_wd / f)},  // lr x wd stays
            {"optim.relative_step", optimizer == "adafactor"}};
  if (optimizer == "lion") d["optim.beta2"] = 0.99;
  return d;
}

std::vector<std::string> apply_switch_defaults(Config& c, const Config& before, const std::set<std::string>& chosen) {
  std::vector<std::string> changed;
  const std::string model = c.get_string("model.name"), preset = c.get_string("model.preset");
  const std::string opt = c.get_string("optim.name"), old_opt = before.get_string("optim.name");
  const bool model_switched = model != before.get_string("model.name") ||
                              (is_text_model(model) && preset != before.get_string("model.preset"));
  const bool optimizer_switched = opt != old_opt;
  auto free = [&](const std::string& k) { return !chosen.count(k); };
  if (model_switched) {
    const Json d = model_defaults(model, preset);
    for (const std::string& k : model_switch_keys()) {
      if (!free(k)) continue;
      Json v = d.at(k);
      if (k == "data.name" && is_text_data(c.get_string("data.name")) == is_text_model(model)) continue;  // fits
      if (k == "optim.lr") v = std::min(10.0, v.get<double>() * lr_factor(opt));
      set_if_differs(c, k, v, changed);
    }
  }
  if (optimizer_switched) {
    // The run's AdamW-equivalent rate and weight decay so far, carried over to the new optimizer
    // (the rate is the new model's, set above, when the model switched too).
    const double r = before.get_float("optim.lr") / lr_factor(old_opt);
    const double wd = before.get_float("optim.weight_decay") * lr_factor(old_opt);
    const Json d = optimizer_defaults(opt, r, wd);
    for (const std::string& k : optimizer_switch_keys())
      if (free(k) && !(k == "optim.lr" && model_switched)) set_if_differs(c, k, d.at(k), changed);
  }
  std::vector<std::string> ordered;
  for (const ConfigKey& k : config_schema())
    if (std::find(changed.begin(), changed.end(), k.key) != changed.end()) ordered.push_back(k.key);
  return ordered;
}

bool key_applies(const std::string& key, const Config& c) {
  const std::string model = c.get_string("model.name");
  if (is_text_model(model)) return !mlp_model_key(key);
  if (text_model_key(key)) return false;
  if (key == "model.hidden") return model == "mlp";  // digits-mlp is 64-256-256-10 whatever it says
  if (key == "data.test_fraction") return c.get_string("data.name") == "digits";
  return true;
}

Config resolved_config(const Config& c) {
  Config out = c;
  if (is_text_model(c.get_string("model.name")) && c.get_string("data.name") == "digits")
    out.set_json("data.name", "tinyshakespeare", "resolved config");
  const Config defaults;
  for (const ConfigKey& k : config_schema())
    if (!key_applies(k.key, out)) out.set_json(k.key, defaults.at(k.key), "resolved config");
  return out;
}

Json recorded_config(const Config& c) {
  const Config r = resolved_config(c);
  Json out = Json::object();
  for (const ConfigKey& k : config_schema()) {
    if (!key_applies(k.key, r)) continue;
    std::string p = "/" + k.key;
    std::replace(p.begin(), p.end(), '.', '/');
    out[Json::json_pointer(p)] = r.at(k.key);
  }
  return out;
}

}  // namespace trainlab
