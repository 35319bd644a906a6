#include "decode/decoder_model.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "decode/decoder.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/transformer.h"
#include "util/error.h"

namespace trainlab {

namespace {
using Json = nlohmann::json;

// The format a quantized file's matrices are in (from its validated metadata), or nullopt for an
// fp32 file.
std::optional<DecodeSpec> file_format(const WeightsMetadata& md, const DecoderShape& shape, const std::string& path) {
  if (!md.quantized) return std::nullopt;
  std::optional<QuantSpec> spec;
  for (const std::string& name : DecodeWeights::matrix_names(shape)) {
    const auto e = std::find_if(md.quant.begin(), md.quant.end(), [&](const QuantEntry& q) { return q.name == name; });
    if (e == md.quant.end())
      throw Error(path + ": matrix '" + name + "' is not quantized; pass --weight-format to choose one format");
    const QuantSpec& s = e->spec;
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
  const WeightsMetadata md = validate_weights_metadata(f, path);
  if (md.architecture.is_null())
    throw Error(path + ": no trainlab_architecture in the metadata (not a weights file written by the lab)");
  const Json& arch = md.architecture;
  if (arch.value("kind", "") != "char-gpt")
    throw Error(path + ": a " + arch.value("kind", std::string("?")) + " model; generate needs a char-gpt");
  auto cpu = create_backend("cpu");
  auto model = build_char_gpt(*cpu, arch, 0);
  load_weights_any(*cpu, *model, f, path);  // quantized files are dequantized on load
  DecoderModel out;
  out.weights = decode_weights(*cpu, *model);
  out.vocab = model->config().chars;
  out.format = file_format(md, out.weights.shape, path);
  out.name = path;
  out.params = model->parameter_count();
  return out;
}

DecoderModel random_decoder_model(const std::string& preset, uint64_t seed) {
  CharGptConfig cfg;
  if (preset == "xl") {
    cfg.layers = 24, cfg.heads = 16, cfg.dim = 2048, cfg.context = 1024;
  } else {
    try {
      cfg = CharGptConfig::preset(preset);
    } catch (const Error&) {
      throw Error("--preset '" + preset + "': expected tiny, small, gpt2 or xl");
    }
  }
  auto cpu = create_backend("cpu");
  CharGpt model(*cpu, cfg, seed);
  DecoderModel out;
  out.weights = decode_weights(*cpu, model);
  out.name = preset + " (random init)";
  out.params = model.parameter_count();
  return out;
}

}  // namespace trainlab
