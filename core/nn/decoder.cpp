#include "nn/decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "backend/backend.h"
#include "nn/parameter.h"
#include "nn/transformer_generate.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace trainlab {

// --- formats ---------------------------------------------------------------------------------
std::string DecodeSpec::label() const {
  switch (format) {
    case DecodeFormat::F32: return "fp32";
    case DecodeFormat::BF16: return "bf16";
    case DecodeFormat::I8:
    case DecodeFormat::I4: {
      std::string s = format == DecodeFormat::I8 ? "int8" : "int4";
      const int container = format == DecodeFormat::I8 ? 8 : 4;
      if (quant.bits != container) s += "(" + std::to_string(quant.bits) + "-bit codes)";
      if (quant.granularity == QuantGranularity::Group) return s + "-g" + std::to_string(quant.group);
      return s + "-" + granularity_name(quant.granularity);
    }
  }
  return "?";
}

DecodeSpec DecodeSpec::parse(const std::string& name, int group) {
  DecodeSpec s;
  if (name == "fp32" || name == "f32") {
    s.format = DecodeFormat::F32;
  } else if (name == "bf16") {
    s.format = DecodeFormat::BF16;
  } else if (name == "int8") {
    s.format = DecodeFormat::I8;
    s.quant = QuantSpec{8, QuantGranularity::Channel, 32};
  } else if (name == "int4") {
    if (group != 32 && group != 64 && group != 128)
      throw Error("--group " + std::to_string(group) + ": int4 decoding takes groups of 32, 64 or 128");
    s.format = DecodeFormat::I4;
    s.quant = QuantSpec{4, QuantGranularity::Group, group};
  } else {
    throw Error("weight format '" + name + "': expected fp32, bf16, int8 or int4");
  }
  return s;
}

DecodeSpec DecodeSpec::parse_label(const std::string& label) {
  if (label == "int8-channel") return parse("int8", 32);
  const std::string g = "int4-g";
  if (label.rfind(g, 0) == 0) {
    const std::string num = label.substr(g.size());
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 4)
      throw Error("weight format '" + label + "': expected int4-g32, int4-g64 or int4-g128");
    return parse("int4", std::stoi(num));
  }
  return parse(label, 32);
}

DecodeSpec DecodeSpec::from_quant(const QuantSpec& q) {
  if (q.bits < 2 || q.bits > 8) throw Error("quantized weights of " + std::to_string(q.bits) + " bits: expected 2..8");
  DecodeSpec s;
  s.format = q.bits <= 4 ? DecodeFormat::I4 : DecodeFormat::I8;
  s.quant = q;
  return s;
}

// --- weights ---------------------------------------------------------------------------------
std::vector<std::string> CharGptWeights::matrix_names(const CharGptConfig& cfg) {
  std::vector<std::string> out;
  for (int64_t l = 0; l < cfg.layers; ++l)
    for (const char* m : {"qkv", "proj", "fc", "out"}) out.push_back("blocks." + std::to_string(l) + "." + m + ".weight");
  out.push_back("head.weight");
  return out;
}

std::vector<std::string> CharGptWeights::all_names(const CharGptConfig& cfg) {
  std::vector<std::string> out{"tok.weight", "pos.weight", "ln.weight", "ln.bias", "head.weight"};
  for (int64_t l = 0; l < cfg.layers; ++l)
    for (const char* t : {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "qkv.weight", "qkv.bias", "proj.weight",
                          "proj.bias", "fc.weight", "fc.bias", "out.weight", "out.bias"})
      out.push_back("blocks." + std::to_string(l) + "." + t);
  return out;
}

CharGptWeights CharGptWeights::from_model(Backend& be, CharGpt& model) {
  CharGptWeights w;
  w.cfg = model.config();
  for (const std::string& name : all_names(w.cfg)) {
    Parameter* p = model.find_parameter(name);
    if (!p) throw Error("internal: char-gpt has no parameter " + name);
    std::vector<float> v(static_cast<size_t>(p->numel()));
    be.download(p->master, v.data(), DType::F32);
    w.tensors[name] = std::move(v);
  }
  return w;
}

const std::vector<float>& CharGptWeights::at(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) throw Error("char-gpt weights: no tensor '" + name + "'");
  return it->second;
}

std::pair<int64_t, int64_t> CharGptWeights::matrix_shape(const std::string& name) const {
  const int64_t d = cfg.dim;
  const auto ends = [&](const char* suffix) {
    const std::string s(suffix);
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (name == "head.weight") return {cfg.padded_vocab(), d};
  if (ends(".qkv.weight")) return {3 * d, d};
  if (ends(".proj.weight")) return {d, d};
  if (ends(".fc.weight")) return {4 * d, d};
  if (ends(".out.weight")) return {d, 4 * d};
  throw Error("internal: '" + name + "' is not a decoder matrix");
}

CharGptWeights CharGptWeights::as_format(const DecodeSpec& spec) const {
  CharGptWeights out = *this;
  if (spec.format == DecodeFormat::F32) return out;
  for (const std::string& name : matrix_names(cfg)) {
    std::vector<float>& v = out.tensors.at(name);
    const auto [rows, cols] = matrix_shape(name);
    if (static_cast<int64_t>(v.size()) != rows * cols) throw Error("char-gpt weights: '" + name + "' has the wrong size");
    if (spec.format == DecodeFormat::BF16) {
      for (float& x : v) x = round_to(DType::BF16, x);
    } else {
      const int64_t group = spec.quant.group_size(rows, cols);
      fake_quantize_host(v.data(), v.data(), rows * cols, spec.quant.bits, group);
    }
  }
  return out;
}

// --- decoding ----------------------------------------------------------------------------------
std::unique_ptr<TokenDecoder> Backend::create_decoder(const CharGptWeights&, const DecodeSpec&) {
  throw_not_supported(Op::Decode);
}

std::unique_ptr<TokenDecoder> make_decoder(Backend& be, const CharGptWeights& w, const DecodeSpec& spec) {
  if (be.info().kind == DeviceKind::Cpu) return std::make_unique<CharGptGenerator>(w.as_format(spec), spec.label());
  return be.create_decoder(w, spec);
}

int32_t sample_token(const float* logits, int64_t V, const SampleOptions& opt, std::mt19937_64& rng) {
  if (opt.temperature <= 0.0f) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (logits[i] > logits[best]) best = i;
    return static_cast<int32_t>(best);
  }
  std::vector<double> z(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) z[i] = static_cast<double>(logits[i]) / opt.temperature;
  if (opt.top_k > 0 && opt.top_k < V) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (opt.top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<size_t>(opt.top_k - 1)];
    for (auto& v : z)
      if (v < kth) v = -INFINITY;
  }
  const double mx = *std::max_element(z.begin(), z.end());
  double sum = 0.0;
  for (auto& v : z) sum += (v = std::exp(v - mx));
  const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0) * sum;
  double c = 0.0;
  for (int64_t i = 0; i < V; ++i) {
    c += z[i];
    if (u < c) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(V - 1);
}

std::vector<int32_t> generate_tokens(TokenDecoder& dec, const CharGptConfig& cfg, const std::vector<int32_t>& prompt,
                                     int64_t n, const SampleOptions& opt, double* tokens_per_s) {
  if (prompt.empty()) throw Error("generation needs a prompt of at least one character");
  const int64_t ctx = cfg.context;
  std::vector<int32_t> win;  // tokens in the current window
  // Appends one token, restarting the window from its last ctx/2 tokens when it is full. With the
  // cache, an append costs one row; without it the whole window is rerun.
  auto advance = [&](int32_t token, bool cache) {
    std::vector<int32_t> w = win;
    if (static_cast<int64_t>(w.size()) == ctx) w.assign(w.end() - std::max<int64_t>(1, ctx / 2), w.end());
    if (ctx == 1) w.clear();
    w.push_back(token);
    if (cache && w.size() == win.size() + 1) {
      dec.push(token);
    } else {
      dec.reset();
      for (int32_t t : w) dec.push(t);
    }
    win = std::move(w);
  };
  dec.reset();
  for (int32_t t : prompt) advance(t, true);  // the prompt is read once (prefill) in both modes
  std::mt19937_64 rng(opt.seed);
  std::vector<int32_t> out;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t next = sample_token(dec.logits().data(), cfg.vocab, opt, rng);
    out.push_back(next);
    if (i + 1 < n) advance(next, opt.use_cache);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (tokens_per_s) *tokens_per_s = s > 0 ? static_cast<double>(n) / s : 0.0;
  return out;
}

}  // namespace trainlab
