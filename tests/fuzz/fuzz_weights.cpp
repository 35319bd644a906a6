// Fuzz target `weights`: a safetensors byte image read as a model's weights file, every format
// (dense, packed int2..int8 with fp16 scales): the metadata checks (validate_weights_metadata), the
// dequantization, building the model of its architecture and loading it (model_from_file) on the
// CPU backend, the run config it stores (weights_config), and, for a dense file, quantizing it to
// int4 and reading that back. A trainlab::Error is the clear-error outcome; any other exception, a
// crash, a sanitizer report or an allocation over the fuzzer's limit is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "backend/cpu_backend.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/model.h"
#include "util/error.h"

namespace {
trainlab::Backend& cpu_backend() {
  static trainlab::CpuBackend be(1);
  return be;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainlab;
  try {
    const SafeTensorsFile f = parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    const WeightsMetadata md = validate_weights_metadata(f, "fuzz");
    const SafeTensorsFile dense = dequantize_weights(f, "fuzz");
    for (const SafeTensor& t : dense.tensors)
      if (t.bytes.size() != safetensors_element_size(t.dtype) * static_cast<uint64_t>(shape_numel(t.shape))) __builtin_trap();
    if (!md.config.is_null()) (void)weights_config(f, "fuzz", [](Config& c) { c.set("data.path", "user.csv"); });
    if (!md.architecture.is_null()) (void)model_from_file(cpu_backend(), f, "fuzz")->parameter_count();
    if (!md.quantized) {
      QuantSpec spec;
      spec.bits = 4;
      const SafeTensorsFile q = quantize_weights(f, [&](const std::string&) { return spec; }, nullptr);
      (void)dequantize_weights(q, "fuzz-q4");
    }
  } catch (const Error&) {
  }
  return 0;
}
