// Fuzz target `quant_meta`: the quantized-tensor metadata (trainlab_quant) and the dequantize path
// (io/weights.h validate_weights_metadata + dequantize_weights, tensor/quant_format.h QuantSpec,
// unpack_codes) on tensors the input describes freely, including ones the safetensors reader would
// never produce (bytes that disagree with dtype and shape: a file made in memory).
// Input: line 1 the trainlab_quant metadata text; line 2 a JSON list of tensors
// [[name, dtype, shape, nbytes], ...] (at most 16; entries that are not of that form are skipped);
// the rest the tensors' bytes, taken in turn (nbytes, clipped to what is left). A trainlab::Error is
// the clear-error outcome; any other exception, a crash or a sanitizer report is a finding. What is
// accepted must dequantize to tensors holding exactly their bytes, and its codes must pack back
// (pack_codes(unpack_codes(x)) == x, but for the unused bits of the last byte).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "io/weights.h"
#include "tensor/quant_format.h"
#include "util/error.h"

namespace {

using trainlab::Json;

// The tensors line 2 describes, filled from `payload`.
std::vector<trainlab::SafeTensor> tensors_of(std::string_view list, std::string_view payload) {
  std::vector<trainlab::SafeTensor> out;
  const Json j = Json::parse(list.begin(), list.end(), nullptr, false);
  if (!j.is_array()) return out;
  for (const Json& d : j) {
    if (out.size() == 16) break;
    if (!d.is_array() || d.size() != 4 || !d[0].is_string() || !d[1].is_string() || !d[2].is_array() ||
        !d[3].is_number_unsigned() || d[2].size() > 8)
      continue;
    trainlab::SafeTensor t;
    t.name = d[0].get<std::string>();
    t.dtype = d[1].get<std::string>();
    bool ok = true;
    for (const Json& x : d[2]) {
      ok = ok && x.is_number_integer();
      if (ok) t.shape.push_back(x.get<int64_t>());
    }
    if (!ok) continue;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(d[3].get<uint64_t>(), payload.size()));
    t.bytes.assign(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(n));
    payload.remove_prefix(n);
    out.push_back(std::move(t));
  }
  return out;
}

void check_codes_pack_back(const trainlab::SafeTensorsFile& f, const trainlab::WeightsMetadata& md) {
  for (const trainlab::QuantEntry& e : md.quant) {
    const std::vector<uint8_t>& packed = f.find(e.name + ".qweight")->bytes;
    const int64_t n = e.shape[0] * e.shape[1];
    const std::vector<uint8_t> again = trainlab::pack_codes(trainlab::unpack_codes(packed, n, e.spec.bits), e.spec.bits);
    if (again.size() != packed.size()) __builtin_trap();
    const uint64_t bits = static_cast<uint64_t>(n) * static_cast<uint64_t>(e.spec.bits);
    for (size_t i = 0; i < again.size(); ++i) {
      const uint64_t used = std::min<uint64_t>(8, bits - 8 * i);
      const uint8_t mask = static_cast<uint8_t>((1u << used) - 1u);
      if ((again[i] & mask) != (packed[i] & mask)) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainlab;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t a = in.find('\n');
  if (a == std::string_view::npos) return 0;
  const size_t b = in.find('\n', a + 1);
  if (b == std::string_view::npos) return 0;
  SafeTensorsFile f;
  f.metadata["trainlab_quant"] = std::string(in.substr(0, a));
  f.tensors = tensors_of(in.substr(a + 1, b - a - 1), in.substr(b + 1));
  try {
    const WeightsMetadata md = validate_weights_metadata(f, "fuzz");
    const SafeTensorsFile dense = dequantize_weights(f, "fuzz");
    for (const SafeTensor& t : dense.tensors)
      if (t.bytes.size() != safetensors_element_size(t.dtype) * static_cast<uint64_t>(shape_numel(t.shape))) __builtin_trap();
    check_codes_pack_back(f, md);
  } catch (const Error&) {
  }
  return 0;
}
