// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON header
// ({"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//   "__metadata__": {string: string}}), padded with spaces to a multiple of 8, then the raw
// little-endian tensor bytes. Offsets are relative to the end of the header.
//
// Reading trusts nothing in the file (safetensors_read.cpp): only regular files are opened; the
// header length is checked against the file's size (and a 100 MiB bound) before anything is
// allocated; the header's JSON nests at most a few levels; every shape is a list of at most 8
// non-negative integers whose element and byte counts are computed with overflow checks and must
// equal the bytes between the tensor's data offsets; the offsets cover the data exactly.
// __metadata__ values are strings (the format's Dict[str, str]). Errors name the file, the tensor
// (printable_name) and what was expected, never the file's bytes.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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
  std::vector<SafeTensor> tensors;  // as written (read back in the order of their data offsets)
  std::map<std::string, std::string> metadata;
  const SafeTensor* find(const std::string& name) const;
};

std::string safetensors_dtype(DType t);  // throws for int4 (stored as packed U8 by callers)
DType dtype_from_safetensors(const std::string& s);

// Bytes of one element of a safetensors dtype name (F64 ... BOOL, F8_E4M3, F8_E5M2); 0 for a name
// the format does not have.
size_t safetensors_element_size(const std::string& dtype);
// Elements of `shape`; nullopt when a dimension is negative or the product overflows int64.
std::optional<int64_t> checked_numel(const Shape& shape);
// A name read from a file (a tensor name, a metadata key), fit to print in an error: quoted,
// non-printable bytes as \xNN, cut after 64 characters.
std::string printable_name(std::string_view name);

// Writes atomically (a temporary file renamed into place). Throws Error naming the path.
void write_safetensors(const std::string& path, const SafeTensorsFile& file);
// Reads a regular file and checks it as described above. Throws Error naming the path and the fault.
SafeTensorsFile read_safetensors(const std::string& path);
// The same checks on a file's bytes in memory; `origin` names it in errors.
SafeTensorsFile parse_safetensors(std::string_view bytes, const std::string& origin);

}  // namespace trainlab
