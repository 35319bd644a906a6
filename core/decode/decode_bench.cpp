#include "decode/decode_bench.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "backend/backend.h"
#include "backend/bandwidth.h"
#include "decode/decoder.h"
#include "decode/decoder_model.h"
#include "util/error.h"

namespace trainlab {

namespace {
using Json = nlohmann::json;

// Decodes n steps greedily from token b (sequence b of the batch; after one untimed step that
// captures the graph): n * batch tokens.
Json bench_format(Backend& be, const DecoderModel& m, const DecodeSpec& spec, int64_t n, double copy_bytes_per_s) {
  const DecoderShape& shape = m.weights.shape;
  n = std::min<int64_t>(n, shape.context - 1);
  const auto p0 = std::chrono::steady_clock::now();
  auto dec = make_decoder(be, m.weights, spec);  // converts, quantizes and uploads the weights
  const double prepare_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
  const auto B = static_cast<size_t>(spec.batch), V = static_cast<size_t>(shape.padded_vocab);
  std::vector<int32_t> next(B);
  for (size_t b = 0; b < B; ++b) next[b] = static_cast<int32_t>(b % static_cast<size_t>(shape.vocab));
  dec->reset();
  std::vector<float> z = dec->push_batch(next);
  int64_t kv = 0;
  const double dev0 = dec->device_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) {
    for (size_t b = 0; b < B; ++b) {
      const auto row = z.begin() + static_cast<std::ptrdiff_t>(b * V);
      next[b] = static_cast<int32_t>(std::max_element(row, row + shape.vocab) - row);
    }
    kv += dec->kv_bytes(dec->length());
    z = dec->push_batch(next);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tps = s > 0 ? static_cast<double>(n) * static_cast<double>(B) / s : 0.0;  // tokens of all sequences
  const double dev_us = n > 0 ? 1e6 * (dec->device_seconds() - dev0) / static_cast<double>(n) : 0.0;  // a step
  Json kernels = Json::object(), kernel_gbs = Json::object();  // device us a step by kernel kind, and GB/s
  for (const auto& [kind, v] : dec->profile_step()) {
    const std::string unit = " GB/s";
    if (kind.size() > unit.size() && kind.compare(kind.size() - unit.size(), unit.size(), unit) == 0)
      kernel_gbs[kind.substr(0, kind.size() - unit.size())] = v;
    else
      kernels[kind] = v;
  }
  const int64_t wbytes = dec->weight_bytes_per_token(), kv_mean = n > 0 ? kv / n : 0;
  // A step reads the weights once and every sequence's cache: the ceiling on tokens/s is the
  // batch times the steps a second the copy bandwidth allows.
  const double ceiling = static_cast<double>(B) * copy_bytes_per_s / static_cast<double>(wbytes + kv_mean);
  const double steps_per_s = tps / static_cast<double>(B);
  // How the device's own decoder ran the step; the CPU reference has no kernels, graph or PDL.
  const bool own = be.supports(Op::Decode, decode_format_dtype(spec.format));
  return Json{{"case", "decode"},
              {"model", m.name},
              {"params", m.params},
              {"device", be.info().name},
              {"format", spec.label()},
              {"batch", spec.batch},
              {"one_kernel", own && spec.one_kernel},
              {"cuda_graph", own && spec.cuda_graph},
              {"pdl", own && spec.pdl},
              {"decoder", dec->describe()},
              {"tokens", n},
              {"prepare_s", prepare_s},
              {"tokens_per_s", tps},
              {"us_per_token", tps > 0 ? 1e6 / tps : 0.0},
              {"us_per_step", steps_per_s > 0 ? 1e6 / steps_per_s : 0.0},
              {"device_us_per_step", dev_us},
              {"kernel_us", kernels},
              {"kernel_gb_per_s", kernel_gbs},
              {"weight_bytes_per_token", wbytes},
              {"kv_bytes_per_token", kv_mean},
              {"bytes_per_token", wbytes + kv_mean},
              {"weight_bytes_per_s", steps_per_s * static_cast<double>(wbytes)},
              {"copy_bytes_per_s", copy_bytes_per_s},
              {"ceiling_tokens_per_s", ceiling},
              {"fraction_of_ceiling", tps / ceiling},
              {"weights_fit_l2", wbytes + kv_mean <= kDecodeL2Bytes}};
}

// The default list: every format in one kernel, and bf16/int4 as a kernel per operation replayed
// as a graph and launched one by one (the CPU has no low-bit storage: fp32 only).
std::vector<DecodeSpec> default_specs(const DecoderModel& m, bool cpu) {
  if (m.format) return {*m.format};
  std::vector<DecodeSpec> out;
  for (const char* f : {"fp32", "bf16", "int8", "int4"})
    if (!cpu || std::string(f) == "fp32") out.push_back(DecodeSpec::parse(f, 32));
  if (!cpu)
    for (const bool graph : {true, false})
      for (const char* f : {"bf16", "int4"}) {
        DecodeSpec e = DecodeSpec::parse(f, 32);
        e.one_kernel = false;
        e.cuda_graph = e.pdl = graph;
        out.push_back(e);
      }
  return out;
}

std::vector<DecodeSpec> bench_specs(const std::string& formats, const DecoderModel& m, bool cpu) {
  if (formats.empty()) return default_specs(m, cpu);
  std::vector<DecodeSpec> out;
  std::stringstream ss(formats);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto strip = [&](const std::string& suffix) {
      const bool has = item.size() > suffix.size() && item.compare(item.size() - suffix.size(), suffix.size(), suffix) == 0;
      if (has) item.resize(item.size() - suffix.size());
      return has;
    };
    const bool nograph = strip("-nograph"), graph = !nograph && strip("-graph");
    DecodeSpec s = DecodeSpec::parse_label(item);
    s.one_kernel = !nograph && !graph;
    s.cuda_graph = s.pdl = !nograph;
    out.push_back(s);
  }
  return out;
}
}  // namespace

std::vector<Json> bench_decode(const std::string& device, const std::string& weights, const std::string& preset,
                               const std::string& formats, int64_t tokens, uint64_t seed,
                               const std::function<void(const Json&)>& on_row, const std::vector<int64_t>& batches) {
  for (const int64_t b : batches)
    if (b < 1 || b > kMaxDecodeBatch)
      throw Error("--batch " + std::to_string(b) + ": expected 1.." + std::to_string(kMaxDecodeBatch) + " sequences");
  const DecoderModel m =
      weights.empty() ? random_decoder_model(preset.empty() ? "small" : preset, seed) : load_decoder_model(weights);
  auto be = create_backend(device);
  std::vector<Json> out;
  const CopyBandwidth bw = measure_copy_bandwidth(*be);
  out.push_back(Json{{"case", "bandwidth"},
                     {"device", be->info().name},
                     {"copy_bytes_per_s", bw.bytes_per_s},
                     {"buffer_bytes", bw.buffer_bytes},
                     {"reps", bw.reps}});
  if (on_row) on_row(out.back());
  for (const int64_t b : batches)
    for (DecodeSpec s : bench_specs(formats, m, be->info().kind == DeviceKind::Cpu)) {
      if (b > 1 && s.one_kernel) {  // a batch runs a kernel per operation (DecodeSpec::batch)
        s.one_kernel = false;
        s.cuda_graph = s.pdl = true;
      }
      s.batch = static_cast<int>(b);
      try {
        out.push_back(bench_format(*be, m, s, tokens, bw.bytes_per_s));
      } catch (const Error& e) {
        out.push_back(Json{{"case", "decode"}, {"model", m.name}, {"format", s.label()}, {"batch", b}, {"error", e.what()}});
      }
      if (on_row) on_row(out.back());
    }
  return out;
}

}  // namespace trainlab
