// io/weights.h validate_weights_metadata and weights_config: every check of a weights file's
// metadata against the tensors present, before anything is built or allocated from it.
#include <unordered_map>

#include "io/weights.h"
#include "config/run_defaults.h"
#include "nn/model.h"
#include "util/error.h"

namespace trainlab {

namespace {

// Metadata JSON nests no deeper than this (the config is 2 levels): deeper input is refused while
// parsing, before anything recursive (flattening a config, printing) runs on it.
constexpr int kMaxMetadataDepth = 32;
// More tensors than any model of the lab has (a 1024-block char-gpt, quantized, has ~25,000).
constexpr size_t kMaxTensors = size_t(1) << 16;
// Rows and columns of a quantized matrix: rows * cols and its code bits cannot overflow.
constexpr int64_t kMaxMatrixDim = INT32_MAX;

using TensorIndex = std::unordered_map<std::string_view, const SafeTensor*>;

const SafeTensor* find(const TensorIndex& index, const std::string& name) {
  const auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

Json parse_metadata(const SafeTensorsFile& f, const char* key, const std::string& path) {
  auto it = f.metadata.find(key);
  if (it == f.metadata.end()) return Json();
  const auto depth_limit = [&](int depth, Json::parse_event_t, Json&) {
    if (depth > kMaxMetadataDepth)
      throw Error(path + ": " + key + " metadata is nested deeper than " + std::to_string(kMaxMetadataDepth) + " levels");
    return true;
  };
  Json j;
  try {
    j = Json::parse(it->second, depth_limit);
  } catch (const Json::parse_error& e) {  // its message quotes the file: only the position is said
    throw Error(path + ": " + key + " metadata is not valid JSON (syntax error at byte " + std::to_string(e.byte) + ")");
  } catch (const Json::exception&) {  // out_of_range: a number beyond double's range
    throw Error(path + ": " + key + " metadata is not valid JSON (a number out of range)");
  }
  if (!j.is_object()) throw Error(path + ": " + key + " metadata is not a JSON object");
  return j;
}

// The tensor holds exactly the bytes its dtype and shape need (the reader guarantees it; a file
// made in memory is checked too, so that nothing below reads past a buffer).
void check_tensor_bytes(const SafeTensor& t, const std::string& path) {
  const std::string where = path + ": tensor " + printable_name(t.name);
  const uint64_t es = safetensors_element_size(t.dtype);
  if (es == 0) throw Error(where + " has unknown dtype");
  const std::optional<int64_t> n = checked_numel(t.shape);
  if (!n || static_cast<uint64_t>(*n) > UINT64_MAX / es) throw Error(where + ": its shape has more elements than any file holds");
  if (t.bytes.size() != es * static_cast<uint64_t>(*n))
    throw Error(where + " holds " + std::to_string(t.bytes.size()) + " bytes, but " + t.dtype + " " + shape_str(t.shape) +
                " needs " + std::to_string(es * static_cast<uint64_t>(*n)));
}

// Dtypes a model's values (weights, biases) may be stored in: the float formats.
bool is_value_dtype(const std::string& dt) {
  return dt == "F32" || dt == "F16" || dt == "BF16" || dt == "F8_E4M3" || dt == "F8_E5M2";
}

// Bytes of b-bit codes for n weights, without overflow (n <= 2^62): 8 bits are plain int8, fewer
// are packed (tensor/quant_format.h).
int64_t code_bytes(int64_t n, int bits) { return bits == 8 ? n : n / 8 * bits + (n % 8 * bits + 7) / 8; }

Shape entry_shape(const Json& m, const std::string& where) {
  const std::string expected = where + ": key 'shape': expected [rows, cols], two integers in [1, " +
                               std::to_string(kMaxMatrixDim) + "]";
  const auto it = m.find("shape");
  if (it == m.end() || !it->is_array() || it->size() != 2) throw Error(expected);
  Shape s;
  for (const auto& d : *it) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > kMaxMatrixDim) throw Error(expected);
    s.push_back(d.get<int64_t>());
  }
  return s;
}

// W.qweight: I8 [rows, cols] (8 bits) or U8 [code bytes] (packed).
void check_codes(const QuantEntry& e, const SafeTensor* q, const std::string& where) {
  const int bits = e.spec.bits;
  const int64_t n = e.shape[0] * e.shape[1], want = code_bytes(n, bits);
  if (!q) throw Error(where + " has no codes (" + e.name + ".qweight)");
  const char* want_dtype = bits == 8 ? "I8" : "U8";
  if (q->dtype != want_dtype)
    throw Error(where + ": " + std::to_string(bits) + "-bit codes are stored as " + want_dtype + ", the file has " + q->dtype);
  if (static_cast<int64_t>(q->bytes.size()) != want)
    throw Error(where + ": " + std::to_string(q->bytes.size()) + " code bytes, expected " + std::to_string(want) + " for " +
                std::to_string(n) + " weights of " + std::to_string(bits) + " bits");
  const Shape want_shape = bits == 8 ? e.shape : Shape{want};
  if (q->shape != want_shape)
    throw Error(where + ": codes have shape " + shape_str(q->shape) + ", expected " + shape_str(want_shape));
}

// W.scales: F16 [groups], finite and non-negative (the quantizer's s = max|w| / qmax).
void check_scales(const QuantEntry& e, const SafeTensor* s, const std::string& where) {
  if (!s) throw Error(where + " has no scales (" + e.name + ".scales)");
  if (s->dtype != "F16") throw Error(where + ": scales are stored as F16, the file has " + s->dtype);
  const int64_t n = e.shape[0] * e.shape[1], groups = n / e.group + (n % e.group != 0);
  if (s->shape.size() != 1 || s->shape[0] != groups) {
    const std::optional<int64_t> count = checked_numel(s->shape);
    if (count && *count != groups)
      throw Error(where + ": " + std::to_string(*count) + " scales, expected " + std::to_string(groups));
    throw Error(where + ": scales have shape " + shape_str(s->shape) + ", expected [" + std::to_string(groups) + "]");
  }
  for (int64_t i = 0; i < groups; ++i) {
    const auto h = static_cast<uint16_t>(s->bytes[static_cast<size_t>(2 * i)] | s->bytes[static_cast<size_t>(2 * i + 1)] << 8);
    if ((h & 0x7c00) == 0x7c00 || ((h & 0x8000) && (h & 0x7fff)))
      throw Error(where + ": scales must be finite and non-negative fp16 values; scale " + std::to_string(i) + " is not");
  }
}

QuantEntry check_quant_entry(const TensorIndex& index, const std::string& name, const Json& m, const std::string& path) {
  const std::string where = path + ": quantized weight " + printable_name(name);
  QuantEntry e;
  e.name = name;
  try {
    e.spec = QuantSpec::from_json(m);
  } catch (const Error& x) {
    throw Error(where + ": " + x.what());
  }
  e.shape = entry_shape(m, where);
  try {
    e.group = e.spec.group_size(e.shape[0], e.shape[1]);
  } catch (const Error& x) {
    throw Error(where + ": " + x.what());
  }
  check_codes(e, find(index, name + ".qweight"), where);
  check_scales(e, find(index, name + ".scales"), where);
  return e;
}

// A mismatch between the architecture and the tensors (its message is complete).
struct ArchitectureMismatch : Error {
  using Error::Error;
};

// The model the architecture describes, parameter by parameter, against the tensors the file
// holds (dense, or quantized with the entry's shape): before the model is built, so a size the
// file does not back is refused, not allocated.
void check_architecture(const WeightsMetadata& md, const TensorIndex& index, const std::string& path) {
  std::unordered_map<std::string_view, const Shape*> quantized;
  for (const QuantEntry& e : md.quant) quantized[e.name] = &e.shape;
  try {
    visit_architecture(md.architecture, [&](const std::string& name, const Shape& shape) {
      const auto q = quantized.find(name);
      const SafeTensor* t = q == quantized.end() ? find(index, name) : nullptr;
      if (q == quantized.end() && !t)
        throw ArchitectureMismatch(path + ": trainlab_architecture needs tensor " + printable_name(name) +
                                   ", which the file does not have");
      const Shape& have = t ? t->shape : *q->second;
      if (have != shape)
        throw ArchitectureMismatch(path + ": tensor " + printable_name(name) + " has shape " + shape_str(have) +
                                   ", trainlab_architecture expects " + shape_str(shape));
    });
  } catch (const ArchitectureMismatch&) {
    throw;
  } catch (const Error& e) {
    throw Error(path + ": trainlab_architecture: " + e.what());
  }
}

}  // namespace

WeightsMetadata validate_weights_metadata(const SafeTensorsFile& f, const std::string& path) {
  WeightsMetadata md;
  md.architecture = parse_metadata(f, "trainlab_architecture", path);
  md.config = parse_metadata(f, "trainlab_config", path);
  const Json qmeta = parse_metadata(f, "trainlab_quant", path);
  md.quantized = !qmeta.is_null();
  if (f.tensors.size() > kMaxTensors)
    throw Error(path + ": " + std::to_string(f.tensors.size()) + " tensors, more than the " + std::to_string(kMaxTensors) +
                " a weights file may hold");
  TensorIndex index;
  for (const SafeTensor& t : f.tensors) {
    check_tensor_bytes(t, path);
    if (!index.emplace(t.name, &t).second) throw Error(path + ": tensor " + printable_name(t.name) + " appears twice");
  }
  for (const SafeTensor& t : f.tensors) {
    const bool q = t.name.ends_with(".qweight"), s = t.name.ends_with(".scales");
    if (md.quantized && (q || s)) {
      const std::string name = t.name.substr(0, t.name.size() - (q ? 8 : 7));
      if (!qmeta.contains(name))
        throw Error(path + ": quantized tensor " + printable_name(t.name) + " has no entry in trainlab_quant metadata");
      if (q) md.quant.push_back(check_quant_entry(index, name, qmeta.at(name), path));
      continue;
    }
    if (!is_value_dtype(t.dtype))
      throw Error(path + ": tensor " + printable_name(t.name) + " is stored as " + t.dtype +
                  "; weights are F32, F16, BF16, F8_E4M3 or F8_E5M2");
    if (md.quantized && qmeta.contains(t.name))
      throw Error(path + ": weight " + printable_name(t.name) + " is stored both dense and quantized");
  }
  if (md.quantized)
    for (auto it = qmeta.begin(); it != qmeta.end(); ++it)
      if (!find(index, it.key() + ".qweight"))
        throw Error(path + ": quantized weight " + printable_name(it.key()) + " has no codes (" + printable_name(it.key() + ".qweight") + ")");
  if (!md.architecture.is_null()) check_architecture(md, index, path);
  return md;
}

Config weights_config(const SafeTensorsFile& f, const std::string& path, const std::function<void(Config&)>& user_settings) {
  const WeightsMetadata md = validate_weights_metadata(f, path);
  if (md.config.is_null()) throw Error(path + ": no trainlab_config metadata (was it written by trainlab?)");
  Config c = Config::from_record(md.config);
  const bool named_data = !c.get_string("data.path").empty();
  for (const char* key : {"data.path", "compress.init_from", "distill.teacher", "run.out"}) c.set_json(key, "", path);
  if (user_settings) user_settings(c);
  c = resolved_config(c);  // what the run read: an older record's char-gpt "digits" is tinyshakespeare
  if (named_data && c.get_string("data.path").empty())
    throw Error(path + ": its run read its data from a file that its trainlab_config names (data.path); a path inside a "
                       "weights file is never opened: give the data with --set data.path=FILE");
  return c;
}

std::string stored_vocabulary(const SafeTensorsFile& f) {
  const auto it = f.metadata.find("trainlab_architecture");
  if (it == f.metadata.end()) return {};
  const Json arch = Json::parse(it->second, nullptr, false);
  if (!arch.is_object() || arch.value("kind", "") != "char-gpt") return {};
  const auto chars = arch.find("chars");
  return chars != arch.end() && chars->is_string() ? chars->get<std::string>() : std::string();
}

}  // namespace trainlab
