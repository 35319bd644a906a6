// Fuzz target `safetensors`: the safetensors reader (io/safetensors.h parse_safetensors, the checks
// read_safetensors makes on a file) on arbitrary bytes: the header length, the JSON header, dtypes,
// shapes, data offsets, __metadata__. A trainlab::Error is the clear-error outcome; any other
// exception, a crash or a sanitizer report is a finding. A parsed file must keep the reader's
// promise: every tensor holds exactly the bytes its dtype and shape need.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "io/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainlab;
  try {
    const SafeTensorsFile f = parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    for (const SafeTensor& t : f.tensors) {
      const std::optional<int64_t> n = checked_numel(t.shape);
      if (!n || t.bytes.size() != safetensors_element_size(t.dtype) * static_cast<uint64_t>(*n)) __builtin_trap();
    }
  } catch (const Error&) {
  }
  return 0;
}
