// What a run does by default for the model and optimizer chosen, and what its record keeps.
//
// Switching the model (model.name, or a char-gpt model.preset) gives that model's own run: its
// length, batch, learning rate and evaluation interval, a data set of the right kind and a new run
// name, as the shipped presets have them (resources/presets/char-tiny.json, ...). A key the user
// set themselves is kept. The digits run of a first start (800 epochs at batch 32) switched to
// char-gpt otherwise ran 390,400 steps of the transformer.
//
// Switching the optimizer (optim.name) gives its customary settings. Learning rates are scaled
// from the rate AdamW would use for the same run ("the AdamW-equivalent rate" r): AdamW, adamw8bit
// and Adafactor r; Lion r / 10, beta1 0.9 and beta2 0.99, as Chen et al. 2023 ("Symbolic Discovery
// of Optimization Algorithms", section 5) recommend: the sign update has a larger norm than Adam's;
// SGD with momentum r x 50 (its update is not normalised by the gradient's size). The weight decay
// is divided by the same factor, so that lr x wd, the decay a step applies, stays (Lion 10x AdamW's
// as its paper advises; SGD 2e-4 for AdamW's 0.01, the customary L2 of SGD).
// Adafactor uses its relative step (Shazeer & Stern 2018): min(1e-2, 1/sqrt(t)) x RMS(w).
// Switching between optimizers keeps r: the current rate divided by the old optimizer's factor.
//
// The same rule serves the window (ConfigForm) and the command line (trainlab-cli train, the
// app's --set): one function, apply_switch_defaults.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "config/config.h"

namespace trainlab {

// The keys a model switch sets, and those an optimizer switch sets.
const std::vector<std::string>& model_switch_keys();
const std::vector<std::string>& optimizer_switch_keys();

// The run defaults of `model` (with `preset` for char-gpt) under AdamW: flat, dotted key -> value
// for every key of model_switch_keys(). data.name is the model kind's default data set.
Json model_defaults(const std::string& model, const std::string& preset);
// The optimizer's settings for an AdamW-equivalent rate `adamw_lr` and AdamW weight decay
// `adamw_wd`: flat, for every key of optimizer_switch_keys(). Throws Error for an unknown name.
// (Values are clamped to the keys' ranges: optim.lr and optim.weight_decay end at 10.)
Json optimizer_defaults(const std::string& optimizer, double adamw_lr, double adamw_wd);
// The factor of `optimizer`'s rate to AdamW's (Lion 0.1, SGD 50, the others 1).
double lr_factor(const std::string& optimizer);
// The name a switch gives a run: "digits MLP", "MLP", "char-gpt tiny".
std::string default_run_name(const std::string& model, const std::string& preset);

// `c` was made from `before` by the user's settings `chosen` (dotted keys they set themselves).
// When model.name or model.preset differs from `before`'s, each model key not chosen takes the
// model's default (data.name only when its kind does not fit the model: text for char-gpt, images
// for the MLPs); when optim.name differs, each optimizer key not chosen takes the optimizer's.
// Returns the keys whose values it changed, in schema order.
std::vector<std::string> apply_switch_defaults(Config& c, const Config& before, const std::set<std::string>& chosen);

// Whether `key` says something about the run `c` describes: false for another model kind's keys
// (model.hidden for char-gpt, model.preset for the MLPs, checkpoint.* for an MLP, which keeps every
// activation; data.test_fraction for text, data.val_fraction and train.eval_windows for images).
bool key_applies(const std::string& key, const Config& c);
// The config of what runs: data.name the text char-gpt reads ("digits", the schema's default, means
// tinyshakespeare to it), and the keys that do not apply at their defaults (they change nothing).
Config resolved_config(const Config& c);
// What a run's record keeps (config.json, a weights file's trainlab_config): resolved_config's
// keys that apply, nested. Config::from_record reads it back (the others take their defaults).
Json recorded_config(const Config& c);

}  // namespace trainlab
