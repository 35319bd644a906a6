#include "backend/token_decoder.h"

#include <algorithm>

#include "backend/backend.h"
#include "tensor/dtype.h"
#include "util/error.h"

namespace trainlab {

DType decode_format_dtype(DecodeFormat f) {
  switch (f) {
    case DecodeFormat::F32: return DType::F32;
    case DecodeFormat::BF16: return DType::BF16;
    case DecodeFormat::I8: return DType::I8;
    case DecodeFormat::I4: return DType::I4;
  }
  return DType::F32;
}

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

// --- shape and weights -----------------------------------------------------------------------
void DecoderShape::validate() const {
  const auto need = [](bool ok, const std::string& what) {
    if (!ok) throw Error("decoder shape: " + what);
  };
  need(vocab >= 1, "vocab " + std::to_string(vocab) + " must be >= 1");
  need(padded_vocab >= vocab, "padded vocab " + std::to_string(padded_vocab) + " is smaller than vocab " + std::to_string(vocab));
  need(layers >= 1, "layers " + std::to_string(layers) + " must be >= 1");
  need(heads >= 1, "heads " + std::to_string(heads) + " must be >= 1");
  need(dim >= 1 && dim % heads == 0,
       "dim " + std::to_string(dim) + " must be a positive multiple of heads (" + std::to_string(heads) + ")");
  need(context >= 1, "context " + std::to_string(context) + " must be >= 1");
}

std::vector<std::string> DecodeWeights::matrix_names(const DecoderShape& shape) {
  std::vector<std::string> out;
  for (int64_t l = 0; l < shape.layers; ++l)
    for (const char* m : {"qkv", "proj", "fc", "out"}) out.push_back("blocks." + std::to_string(l) + "." + m + ".weight");
  out.push_back("head.weight");
  return out;
}

std::vector<std::string> DecodeWeights::all_names(const DecoderShape& shape) {
  std::vector<std::string> out{"tok.weight", "pos.weight", "ln.weight", "ln.bias", "head.weight"};
  for (int64_t l = 0; l < shape.layers; ++l)
    for (const char* t : {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "qkv.weight", "qkv.bias", "proj.weight",
                          "proj.bias", "fc.weight", "fc.bias", "out.weight", "out.bias"})
      out.push_back("blocks." + std::to_string(l) + "." + t);
  return out;
}

const std::vector<float>& DecodeWeights::at(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) throw Error("decoder weights: no tensor '" + name + "'");
  return it->second;
}

namespace {
// Elements of a tensor that is not a matrix (embeddings, biases, LayerNorm parameters).
int64_t vector_numel(const DecoderShape& s, const std::string& name) {
  const int64_t d = s.dim;
  if (name == "tok.weight") return s.padded_vocab * d;
  if (name == "pos.weight") return s.context * d;
  if (name.ends_with(".qkv.bias")) return 3 * d;
  if (name.ends_with(".fc.bias")) return 4 * d;
  return d;  // LayerNorm weights and biases, proj.bias, out.bias
}
}  // namespace

std::pair<int64_t, int64_t> DecodeWeights::matrix_shape(const std::string& name) const {
  const int64_t d = shape.dim;
  if (name == "head.weight") return {shape.padded_vocab, d};
  if (name.ends_with(".qkv.weight")) return {3 * d, d};
  if (name.ends_with(".proj.weight")) return {d, d};
  if (name.ends_with(".fc.weight")) return {4 * d, d};
  if (name.ends_with(".out.weight")) return {d, 4 * d};
  throw Error("internal: '" + name + "' is not a decoder matrix");
}

void DecodeWeights::validate() const {
  shape.validate();
  const std::vector<std::string> matrices = matrix_names(shape);
  for (const std::string& name : all_names(shape)) {
    const std::vector<float>& v = at(name);
    const bool matrix = std::find(matrices.begin(), matrices.end(), name) != matrices.end();
    int64_t numel = vector_numel(shape, name);
    if (matrix) {
      const auto [rows, cols] = matrix_shape(name);
      numel = rows * cols;
    }
    if (static_cast<int64_t>(v.size()) != numel)
      throw Error("decoder weights: '" + name + "' has " + std::to_string(v.size()) + " values, the shape needs " +
                  std::to_string(numel));
  }
}

DecodeWeights DecodeWeights::as_format(const DecodeSpec& spec) const {
  DecodeWeights out = *this;
  if (spec.format == DecodeFormat::F32) return out;
  for (const std::string& name : matrix_names(shape)) {
    std::vector<float>& v = out.tensors.at(name);
    const auto [rows, cols] = matrix_shape(name);
    if (static_cast<int64_t>(v.size()) != rows * cols) throw Error("decoder weights: '" + name + "' has the wrong size");
    if (spec.format == DecodeFormat::BF16) {
      for (float& x : v) x = round_to(DType::BF16, x);
    } else {
      const int64_t group = spec.quant.group_size(rows, cols);
      fake_quantize_host(v.data(), v.data(), rows * cols, spec.quant.bits, group);
    }
  }
  return out;
}

std::vector<float> TokenDecoder::push_batch(const std::vector<int32_t>& tokens) {
  if (static_cast<int64_t>(tokens.size()) != batch())
    throw Error("push_batch: " + std::to_string(tokens.size()) + " tokens for a batch of " + std::to_string(batch()) +
                " sequences (expected one token a sequence)");
  push(tokens[0]);
  return logits();
}

std::vector<float> TokenDecoder::push_rows(const std::vector<int32_t>& tokens) {
  const auto V = static_cast<size_t>(shape().padded_vocab);
  std::vector<float> rows;
  rows.reserve(tokens.size() * V);
  for (int32_t t : tokens) {
    push(t);
    rows.insert(rows.end(), logits().begin(), logits().begin() + static_cast<std::ptrdiff_t>(V));
  }
  return rows;
}

void check_truncate(const TokenDecoder& dec, int64_t length) {
  if (length < 0 || length > dec.length())
    throw Error("internal: cannot truncate a decoding window of " + std::to_string(dec.length()) + " positions to " +
                std::to_string(length));
}

// --- the backend's operation -------------------------------------------------------------------
std::unique_ptr<TokenDecoder> Backend::create_decoder(const DecodeWeights&, const DecodeSpec&) {
  throw_not_supported(Op::Decode);
}

}  // namespace trainlab
