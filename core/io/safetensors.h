// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON header
// ({"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//   "__metadata__": {string: string}}), padded with spaces to a multiple of 8, then the raw
// little-endian tensor bytes. Offsets are relative to the end of the header.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/tensor.h"

namespace trainlab {

struct SafeTensor {
  std::string name;
  std::string dtype;  // safetensors name: F32, F16, BF16, I8, U8, I32, F8_E4M3, F8_E5M2
  Shape shape;
  std::vector<uint8_t> bytes;
};

struct SafeTensorsFile {
  std::vector<SafeTensor> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  const SafeTensor* find(const std::string& name) const;
};

std::string safetensors_dtype(DType t);  // throws for int4 (stored as packed U8 by callers)
DType dtype_from_safetensors(const std::string& s);

// Writes atomically (a temporary file renamed into place). Throws Error naming the path.
void write_safetensors(const std::string& path, const SafeTensorsFile& file);
// Reads and checks the layout (header size, offsets contiguous and in range, byte counts
// matching dtype and shape). Throws Error naming the path and the fault.
SafeTensorsFile read_safetensors(const std::string& path);

}  // namespace trainlab
