#include "decode/decoder_model.h"

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "compress/quant.h"
#include "decode/decoder.h"
#include "io/safetensors.h"
#include "nn/transformer.h"
#include "util/error.h"

namespace trainlab {

namespace {
using Json = nlohmann::json;

// The format a quantized file's matrices are in, or nullopt for an fp32 file.
std::optional<DecodeSpec> file_format(const SafeTensorsFile& f, const DecoderShape& shape, const std::string& path) {
  if (!is_quantized_file(f)) return std::nullopt;
  const Json q = Json::parse(f.metadata.at("trainlab_quant"));
  std::optional<QuantSpec> spec;
  for (const std::string& name : DecodeWeights::matrix_names(shape)) {
    if (!q.contains(name)) throw Error(path + ": matrix '" + name + "' is not quantized; pass --weight-format to choose one format");
    const QuantSpec s = QuantSpec::from_json(q.at(name));
    if (spec && (s.bits != spec->bits || s.granularity != spec->granularity ||
                 (s.granularity == QuantGranularity::Group && s.group != spec->group)))
      throw Error(path + ": the matrices are quantized with different specs (" + spec->label() + ", " + s.label() +
                  "); the GPU decoder keeps one format: pass --weight-format");
    spec = s;
  }
  return DecodeSpec::from_quant(*spec);
}
}  // namespace

DecoderModel load_decoder_model(const std::string& path) {
  const SafeTensorsFile f = read_safetensors(path);
  const auto it = f.metadata.find("trainlab_architecture");
  if (it == f.metadata.end())
    throw Error(path + ": no trainlab_architecture in the metadata (not a weights file written by the lab)");
  const Json arch = Json::parse(it->second);
  if (arch.value("kind", "") != "char-gpt")
    throw Error(path + ": a " + arch.value("kind", std::string("?")) + " model; generate needs a char-gpt");
  auto cpu = create_backend("cpu");
  auto model = build_char_gpt(*cpu, arch, 0);
  load_weights_any(*cpu, *model, f, path);  // quantized files are dequantized on load
  DecoderModel out;
  out.weights = decode_weights(*cpu, *model);
  out.vocab = model->config().chars;
  out.format = file_format(f, out.weights.shape, path);
  out.name = path;
  out.params = model->parameter_count();
  return out;
}

DecoderModel random_decoder_model(const std::string& preset, uint64_t seed) {
  CharGptConfig cfg = CharGptConfig::preset(preset);
  auto cpu = create_backend("cpu");
  CharGpt model(*cpu, cfg, seed);
  DecoderModel out;
  out.weights = decode_weights(*cpu, model);
  out.name = preset + " (random init)";
  out.params = model.parameter_count();
  return out;
}

}  // namespace trainlab
