#include "io/safetensors.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/safe_file.h"

namespace trainlab {

const SafeTensor* SafeTensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string safetensors_dtype(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I8: return "I8";
    case DType::F8E4M3: return "F8_E4M3";
    case DType::F8E5M2: return "F8_E5M2";
    case DType::I4: break;
  }
  throw Error("int4 tensors are stored packed as U8 in safetensors files");
}

DType dtype_from_safetensors(const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "I32") return DType::I32;
  if (s == "I8") return DType::I8;
  if (s == "F8_E4M3") return DType::F8E4M3;
  if (s == "F8_E5M2") return DType::F8E5M2;
  throw Error("unsupported safetensors dtype '" + s + "'");
}

namespace {
size_t element_size(const std::string& dt) { return safetensors_element_size(dt); }
}  // namespace

void write_safetensors(const std::string& path, const SafeTensorsFile& file) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) {
    nlohmann::ordered_json md = nlohmann::ordered_json::object();
    for (const auto& [k, v] : file.metadata) md[k] = v;
    header["__metadata__"] = md;
  }
  uint64_t offset = 0;
  for (const auto& t : file.tensors) {
    const size_t es = element_size(t.dtype);
    if (es && t.bytes.size() != es * static_cast<size_t>(shape_numel(t.shape)))
      throw Error("tensor '" + t.name + "': " + std::to_string(t.bytes.size()) + " bytes do not match " + t.dtype + " " +
                  shape_str(t.shape));
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  // Temporary file, every write checked, fsync, rename (util/safe_file.h): a full disk or a crash
  // never leaves a torn weights file in place of a whole one, and a link at `path` is not followed.
  AtomicFile out(path);
  const uint64_t n = h.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xFF);
  out.write(len, 8);
  out.write(h);
  for (const auto& t : file.tensors) out.write(t.bytes.data(), t.bytes.size());
  out.commit();
}

}  // namespace trainlab
