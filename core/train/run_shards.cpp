#include "train/run_shards.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "config/dist_options.h"
#include "io/safetensors.h"
#include "util/error.h"
#include "util/safe_file.h"

namespace fs = std::filesystem;

namespace trainlab {

namespace {

constexpr uint64_t kMaxHeader = 100u << 20;  // io/safetensors.h's bound

std::string shard_file_name(long step, int rank, int world) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "checkpoint-%09ld-shard%dof%d.safetensors", step, rank, world);
  return buf;
}

int64_t int_in(const Json& j, const char* name, int64_t lo, int64_t hi, const std::string& where) {
  const auto it = j.find(name);
  if (it == j.end()) throw Error(where + ": field '" + name + "' is missing");
  const bool ok = (it->is_number_unsigned() && it->get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                   static_cast<int64_t>(it->get<uint64_t>()) >= lo) ||
                  (it->is_number_integer() && it->get<int64_t>() >= lo && it->get<int64_t>() <= hi);
  if (!ok)
    throw Error(where + ": field '" + name + "': expected an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  return it->get<int64_t>();
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// A shard file opened for reading parts of its F32 vectors: the header checked, each tensor's
// place in the file. Only what the header says is read; no tensor is read whole.
class ShardReader {
 public:
  ShardReader(const std::string& path, uint64_t size, int64_t numel) : m_path(path), m_in(path, std::ios::binary) {
    if (!m_in) throw Error(path + ": cannot be opened");
    unsigned char len[8];
    if (!m_in.read(reinterpret_cast<char*>(len), 8)) throw Error(path + ": shorter than a safetensors header");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    if (n > kMaxHeader || n > size - 8) throw Error(path + ": header length does not fit the file");
    std::string text(static_cast<size_t>(n), '\0');
    if (!m_in.read(text.data(), static_cast<std::streamsize>(n))) throw Error(path + ": header cannot be read");
    const Json h = Json::parse(text, nullptr, false);
    if (!h.is_object()) throw Error(path + ": header: expected a JSON object");
    const uint64_t data = 8 + n;
    for (auto it = h.begin(); it != h.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      const Json& t = it.value();
      const std::string where = path + ": tensor " + printable_name(it.key());
      const bool shaped = t.is_object() && t.contains("dtype") && t["dtype"] == "F32" && t.contains("shape") &&
                          t["shape"] == Json::array({numel}) && t.contains("data_offsets") &&
                          t["data_offsets"].is_array() && t["data_offsets"].size() == 2 &&
                          t["data_offsets"][0].is_number_unsigned() && t["data_offsets"][1].is_number_unsigned();
      if (!shaped) throw Error(where + ": expected F32 [" + std::to_string(numel) + "] with its data offsets");
      const uint64_t b = t["data_offsets"][0].get<uint64_t>(), e = t["data_offsets"][1].get<uint64_t>();
      if (e < b || e - b != static_cast<uint64_t>(numel) * 4 || e > size - data)
        throw Error(where + ": data offsets do not fit its shape or the file");
      m_at[it.key()] = data + b;
    }
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [n, at] : m_at) out.push_back(n);
    return out;
  }
  // Elements [lo, lo + count) of tensor `name` into out.
  void read(const std::string& name, int64_t lo, int64_t count, float* out) {
    const auto it = m_at.find(name);
    if (it == m_at.end()) throw Error(m_path + ": tensor '" + name + "' is missing");
    m_in.seekg(static_cast<std::streamoff>(it->second + static_cast<uint64_t>(lo) * 4));
    if (count > 0 && !m_in.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(count * 4)))
      throw Error(m_path + ": tensor '" + name + "' cannot be read");
  }

 private:
  std::string m_path;
  std::ifstream m_in;
  std::map<std::string, uint64_t> m_at;
};

}  // namespace

bool is_shard_file_name(const std::string& n) {
  long step = 0;
  int rank = 0, world = 0, used = 0;
  if (n.size() > 80 || std::sscanf(n.c_str(), "checkpoint-%9ld-shard%dof%d.safetensors%n", &step, &rank, &world, &used) != 3)
    return false;
  return static_cast<size_t>(used) == n.size() && step >= 0 && rank >= 0 && world > rank &&
         n == shard_file_name(step, rank, world);
}

Json shard_layout_json(const ShardLayout& l) {
  Json files = Json::array();
  for (const ShardFile& f : l.files)
    files.push_back(
        {{"rank", f.rank}, {"begin", f.begin}, {"end", f.end}, {"file", f.file}, {"bytes", f.bytes}, {"crc32", f.crc32}});
  return {{"world_size", l.world_size}, {"strategy", l.strategy}, {"elements", l.elements}, {"files", files}};
}

ShardLayout parse_shard_layout(const Json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": expected a JSON object");
  ShardLayout l;
  l.world_size = static_cast<int>(int_in(j, "world_size", 1, 1 << 20, where));
  const auto s = j.find("strategy");
  if (s == j.end() || !s->is_string()) throw Error(where + ": field 'strategy': expected zero1, zero2 or zero3");
  l.strategy = s->get<std::string>();
  if (l.strategy != "zero1" && l.strategy != "zero2" && l.strategy != "zero3")
    throw Error(where + ": field 'strategy': expected zero1, zero2 or zero3");
  l.elements = int_in(j, "elements", 0, int64_t{1} << 50, where);
  const auto files = j.find("files");
  if (files == j.end() || !files->is_array() || files->size() != static_cast<size_t>(l.world_size))
    throw Error(where + ": field 'files': expected an array of world_size (" + std::to_string(l.world_size) +
                ") shard files");
  int64_t next = 0;
  for (const Json& f : *files) {
    const std::string fw = where + ": files[" + std::to_string(l.files.size()) + "]";
    if (!f.is_object()) throw Error(fw + ": expected a JSON object");
    ShardFile sf;
    sf.rank = static_cast<int>(int_in(f, "rank", 0, l.world_size - 1, fw));
    sf.begin = int_in(f, "begin", 0, l.elements, fw);
    sf.end = int_in(f, "end", 0, l.elements, fw);
    if (sf.rank != static_cast<int>(l.files.size()) || sf.begin != next || sf.end < sf.begin)
      throw Error(fw + ": expected rank " + std::to_string(l.files.size()) + "'s range, from element " +
                  std::to_string(next) + " on (the files cover the layout in rank order)");
    next = sf.end;
    const auto name = f.find("file");
    if (name == f.end() || !name->is_string() || !is_shard_file_name(name->get<std::string>()))
      throw Error(fw + ": field 'file': expected a name checkpoint-<step>-shard<r>of<W>.safetensors inside the run folder");
    sf.file = name->get<std::string>();
    sf.bytes = static_cast<uint64_t>(int_in(f, "bytes", 8, int64_t{1} << 50, fw));
    sf.crc32 = static_cast<uint32_t>(int_in(f, "crc32", 0, 0xFFFFFFFFL, fw));
    l.files.push_back(std::move(sf));
  }
  if (next != l.elements)
    throw Error(where + ": field 'files': the ranges end at element " + std::to_string(next) + "; expected " +
                std::to_string(l.elements));
  return l;
}

ShardLayout write_state_shards(const std::string& dir, long step, dist::DataParallel& dp, const Optimizer& opt) {
  dist::Communicator& comm = dp.comm();
  const std::string name = shard_file_name(step, comm.rank(), comm.size());
  // Every rank takes part in the gather below, whether its write worked or not.
  double mine[3] = {0.0, 0.0, 0.0};  // ok, bytes, crc32
  std::string why;
  try {
    SafeTensorsFile f;
    const auto put = [&](const std::string& tensor, const std::vector<float>& v) {
      f.tensors.push_back({tensor, "F32", {static_cast<int64_t>(v.size())}, f32_bytes(v)});
    };
    put("master", dp.master_state());
    for (const auto& [buffer, values] : dp.optimizer_state(opt)) put("optim/" + buffer, values);
    f.metadata["format"] = "trainlab-checkpoint-shard";
    write_safetensors(dir + "/" + name, f);
    const auto [bytes, crc] = file_size_and_crc32(dir + "/" + name);
    mine[0] = 1.0;
    mine[1] = static_cast<double>(bytes);
    mine[2] = static_cast<double>(crc);
  } catch (const Error& e) {
    why = e.what();
  }
  const std::vector<double> all = comm.all_gather_host(std::span<const double>(mine, 3));
  ShardLayout l;
  l.world_size = comm.size();
  l.strategy = dist_strategy_name(dp.strategy());
  l.elements = dp.state_elements();
  for (int r = 0; r < comm.size(); ++r) {
    const double* v = all.data() + 3 * r;
    if (v[0] != 1.0)
      throw Error("rank " + std::to_string(r) + " could not write its shard of the checkpoint" +
                  (r == comm.rank() ? " (" + why + ")" : std::string()));
    const dist::ShardRange s = dist::shard_range(l.elements, comm.size(), r);
    l.files.push_back({r, s.begin, s.end, shard_file_name(step, r, comm.size()), static_cast<uint64_t>(v[1]),
                       static_cast<uint32_t>(v[2])});
  }
  return l;
}

StateSlice read_state_slice(const std::string& dir, const ShardLayout& layout, dist::ShardRange range) {
  StateSlice out;
  out.master.assign(static_cast<size_t>(range.size()), 0.0f);
  bool first = true;
  for (const ShardFile& f : layout.files) {
    const int64_t lo = std::max(range.begin, f.begin), hi = std::min(range.end, f.end);
    if (lo >= hi) continue;  // no part of this file is needed here
    const std::string path = dir + "/" + f.file;
    std::error_code ec;
    const uint64_t size = fs::is_regular_file(path, ec) ? fs::file_size(path, ec) : 0;
    if (ec || size != f.bytes)
      throw Error(path + (size == 0 ? " is missing" : " does not have the size checkpoint.json gives") +
                  ": the checkpoint's shards need it as it was written");
    if (lo == f.begin && hi == f.end && file_size_and_crc32(path).second != f.crc32)
      throw Error(path + " does not match checkpoint.json (its CRC-32 differs): the file was changed or damaged");
    ShardReader reader(path, size, f.end - f.begin);
    std::vector<std::string> optim;
    for (const std::string& n : reader.names())
      if (n.rfind("optim/", 0) == 0) optim.push_back(n.substr(6));
    if (first) {
      for (const std::string& b : optim) out.optim[b].assign(static_cast<size_t>(range.size()), 0.0f);
      first = false;
    } else if (optim.size() != out.optim.size() ||
               !std::all_of(optim.begin(), optim.end(), [&](const std::string& b) { return out.optim.count(b) > 0; })) {
      throw Error(path + ": holds other optimizer state than the shards before it");
    }
    reader.read("master", lo - f.begin, hi - lo, out.master.data() + (lo - range.begin));
    for (auto& [b, values] : out.optim) reader.read("optim/" + b, lo - f.begin, hi - lo, values.data() + (lo - range.begin));
  }
  return out;
}

}  // namespace trainlab
