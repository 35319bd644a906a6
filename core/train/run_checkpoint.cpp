#include "train/run_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "dist/tensor_group.h"
#include "io/safetensors.h"
#include "util/error.h"
#include "util/safe_file.h"

namespace fs = std::filesystem;

namespace trainlab {

namespace {

constexpr const char* kFormat = "trainlab-checkpoint";
constexpr int kVersion = 1;
constexpr long kMaxSteps = 1000000000000L;  // train.steps' maximum

// "line L, column C" of byte offset `at` (1-based, as the JSON parser counts) in `bytes`.
std::string position_text(std::string_view bytes, size_t at) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i + 1 < at && i < bytes.size(); ++i) {
    if (bytes[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

const Json& field(const Json& j, const char* name, const std::string& where) {
  const auto it = j.find(name);
  if (it == j.end()) throw Error(where + ": field '" + name + "' is missing");
  return *it;
}

long int_field(const Json& j, const char* name, long lo, long hi, const std::string& where) {
  const Json& v = field(j, name, where);
  bool ok = false;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    ok = u <= static_cast<uint64_t>(hi) && (lo <= 0 || u >= static_cast<uint64_t>(lo));
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    ok = x >= lo && x <= hi;
  }
  if (!ok)
    throw Error(where + ": field '" + name + "': expected an integer in [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  return v.is_number_unsigned() ? static_cast<long>(v.get<uint64_t>()) : static_cast<long>(v.get<int64_t>());
}

// A finite number; with a lower bound `lo` (>= lo, or > lo when `above`) unless lo is -inf.
double num_field(const Json& j, const char* name, double lo, bool above, const std::string& where) {
  const Json& v = field(j, name, where);
  const double x = v.is_number() ? v.get<double>() : std::nan("");
  if (!std::isfinite(x) || x < lo || (above && x == lo)) {
    std::string want = "a finite number";
    if (std::isfinite(lo)) want += std::string(above ? " > " : " >= ") + (lo == 0 ? "0" : std::to_string(lo));
    throw Error(where + ": field '" + name + "': expected " + want);
  }
  return x;
}

const Json& object_field(const Json& j, const char* name, const std::string& where) {
  const Json& v = field(j, name, where);
  if (!v.is_object()) throw Error(where + ": field '" + name + "': expected a JSON object");
  return v;
}

// A tensors file name this module writes: checkpoint-<digits>.safetensors (nothing that leaves the
// run folder).
bool is_tensors_name(const std::string& n) {
  const std::string pre = "checkpoint-", suf = ".safetensors";
  if (n.size() <= pre.size() + suf.size() || n.size() > pre.size() + suf.size() + 20) return false;
  if (n.compare(0, pre.size(), pre) != 0 || n.compare(n.size() - suf.size(), suf.size(), suf) != 0) return false;
  for (size_t i = pre.size(); i < n.size() - suf.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return false;
  return true;
}

std::string tensors_name(long step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "checkpoint-%09ld.safetensors", step);
  return buf;
}

// fsync of a file or a folder (the folder makes a rename inside it durable).
void sync_path(const std::string& path, bool folder) {
  const int fd = ::open(path.c_str(), folder ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw Error(path + ": cannot open to flush it to disk (" + std::strerror(errno) + ")");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw Error(path + ": cannot flush to disk (" + std::strerror(err) + ")");
}

void rename_durably(const std::string& from, const std::string& to, const std::string& dir) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) throw Error(to + ": cannot move into place (" + ec.message() + ")");
  sync_path(dir, true);
}

SafeTensor f32_tensor(const std::string& name, const std::vector<float>& v) {
  SafeTensor t;
  t.name = name;
  t.dtype = "F32";
  t.shape = {static_cast<int64_t>(v.size())};
  t.bytes.resize(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

std::vector<float> f32_values(const SafeTensor& t, int64_t numel, const std::string& where) {
  if (t.dtype != "F32" || t.shape.size() != 1 || t.shape[0] != numel)
    throw Error(where + ": tensor '" + t.name + "' is " + t.dtype + " " + shape_str(t.shape) + "; expected F32 [" +
                std::to_string(numel) + "]");
  std::vector<float> v(static_cast<size_t>(numel));
  if (numel > 0) std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  return v;
}

Json progress_json(const RunProgress& p) {
  return {{"step", p.step},
          {"optimizer_steps", p.optimizer_steps},
          {"total_steps", p.total_steps},
          {"steps_per_epoch", p.steps_per_epoch},
          {"last_loss", p.last_loss},
          {"samples_done", p.samples_done},
          {"train_seconds", p.train_seconds},
          {"wall_s", p.wall_s}};
}

// How a run spreads over ranks (resharded on resume).
bool is_dist_key(const std::string& key) { return key.rfind("dist.", 0) == 0; }

// Keys in which a checkpoint's config may differ from the run's config.json: the ones a run may
// change while it trains, and the ones a resume may set.
bool may_differ_from_start(const std::string& key) {
  if (key.rfind("run.", 0) == 0 || is_dist_key(key)) return true;
  const ConfigKey* k = find_config_key(key);
  if (k && k->mid_run) return true;
  for (const auto& s : resume_settable_keys())
    if (s == key) return true;
  return false;
}

bool may_differ_on_resume(const std::string& key) {
  if (key == "run.out" || is_dist_key(key)) return true;
  for (const auto& s : resume_settable_keys())
    if (s == key) return true;
  return false;
}

Config checkpoint_config(const RunCheckpointInfo& info, const std::string& origin) {
  return Config::from_json(info.config, origin + " (its config)");
}

std::string read_file_text(const std::string& path, bool& found) {
  std::ifstream in(path, std::ios::binary);
  found = static_cast<bool>(in);
  if (!found) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

const std::vector<std::string>& resume_settable_keys() {
  static const std::vector<std::string> keys = {"run.checkpoint_every", "run.name", "run.save_weights",
                                                "device.kernel_timing"};
  return keys;
}

void check_resume_overrides(const Config& base, const Config& changed) {
  for (const std::string& k : Config::differences(base, changed)) {
    if (may_differ_on_resume(k) && k != "run.out") continue;
    std::string allowed;
    for (const auto& s : resume_settable_keys()) allowed += (allowed.empty() ? "" : ", ") + s;
    throw Error("--set " + k +
                " cannot be given with --resume: a resumed run keeps the settings of the run it "
                "continues; only " +
                allowed + " may change");
  }
}

RunCheckpointInfo parse_run_checkpoint(std::string_view bytes, const std::string& origin) {
  Json j;
  try {
    j = Json::parse(bytes.begin(), bytes.end());
  } catch (const Json::parse_error& e) {
    throw Error(origin + ": not valid JSON at " + position_text(bytes, e.byte));
  } catch (const Json::exception&) {  // out_of_range: a number too large for a double
    throw Error(origin + ": not valid JSON (a number is out of range)");
  }
  if (!j.is_object()) throw Error(origin + ": expected a JSON object");
  const auto fmt = j.find("format");
  if (fmt == j.end() || !fmt->is_string() || fmt->get<std::string>() != kFormat)
    throw Error(origin + ": field 'format': expected \"" + kFormat + "\" (not a TrainLab run checkpoint)");
  if (int_field(j, "version", 0, 1000000, origin) != kVersion)
    throw Error(origin + ": field 'version': expected " + std::to_string(kVersion) +
                " (written by another version of TrainLab)");
  RunCheckpointInfo c;
  RunProgress& p = c.progress;
  p.total_steps = int_field(j, "total_steps", 2, kMaxSteps, origin);
  p.step = int_field(j, "step", 1, p.total_steps - 1, origin);
  p.optimizer_steps = int_field(j, "optimizer_steps", 0, p.step, origin);
  p.steps_per_epoch = int_field(j, "steps_per_epoch", 1, kMaxSteps, origin);
  const double any = -std::numeric_limits<double>::infinity();
  p.last_loss = num_field(j, "last_loss", any, false, origin);
  p.samples_done = num_field(j, "samples_done", 0, false, origin);
  p.train_seconds = num_field(j, "train_seconds", 0, false, origin);
  p.wall_s = num_field(j, "wall_s", 0, false, origin);
  const Json& ls = object_field(j, "loss_scaler", origin);
  const std::string ls_where = origin + ": loss_scaler";
  c.loss_scaler.scale = num_field(ls, "scale", 0, true, ls_where);
  c.loss_scaler.good = int_field(ls, "good", 0, kMaxSteps, ls_where);
  c.loss_scaler.skipped = int_field(ls, "skipped", 0, kMaxSteps, ls_where);
  c.loss_scaler.consecutive_skips = int_field(ls, "consecutive_skips", 0, kMaxSteps, ls_where);
  c.config = object_field(j, "config", origin);
  c.data = object_field(j, "data", origin);
  c.model_random = object_field(j, "model_random", origin);
  const Json& t = object_field(j, "tensors", origin);
  const std::string t_where = origin + ": tensors";
  const Json& file = field(t, "file", t_where);
  if (!file.is_string() || !is_tensors_name(file.get<std::string>()))
    throw Error(t_where + ": field 'file': expected a name checkpoint-<step>.safetensors inside the run folder");
  c.tensors_file = file.get<std::string>();
  c.tensors_bytes = static_cast<uint64_t>(int_field(t, "bytes", 8, 1L << 50, t_where));
  c.tensors_crc32 = static_cast<uint32_t>(int_field(t, "crc32", 0, 0xFFFFFFFFL, t_where));
  if (const auto sh = j.find("shards"); sh != j.end()) c.shards = parse_shard_layout(*sh, origin + ": shards");
  return c;
}

std::optional<RunCheckpointInfo> read_run_checkpoint(const std::string& dir) {
  const std::string path = dir + "/checkpoint.json";
  bool found = false;
  const std::string text = read_file_text(path, found);
  if (!found) {
    std::error_code ec;
    if (fs::exists(path, ec)) throw Error(path + ": cannot be read");
    return std::nullopt;
  }
  return parse_run_checkpoint(text, path);
}

void write_run_checkpoint(const std::string& dir, const RunProgress& progress, const Config& config,
                          const RunParts& parts) {
  std::vector<Parameter*> params = parts.model.parameters();
  const FlatParams flat(params);
  if (parts.tensor && parts.sharded)
    throw Error("checkpoints of a run with dist.tp > 1 and a ZeRO dist.strategy are not supported (use dist.strategy "
                "ddp, or run.checkpoint_every 0)");
  const bool root = parts.tensor ? parts.writes : !parts.sharded || parts.sharded->comm().rank() == 0;
  // A tensor-parallel rank's flat values become the whole model's (collective over its group).
  const auto whole = [&](std::vector<float> v) { return parts.tensor ? dist::gather_whole_flat(*parts.tensor, params, v) : v; };
  SafeTensorsFile f;
  if (!parts.sharded) {
    std::vector<float> local(static_cast<size_t>(flat.numel()));
    for (size_t i = 0; i < params.size(); ++i)
      parts.be.download(params[i]->master, local.data() + flat.offset(i), DType::F32);
    f.tensors.push_back(f32_tensor("master", whole(std::move(local))));
  }
  if (!parts.sharded)
    for (const auto& [name, values] : parts.opt.save_state(parts.be, params))
      f.tensors.push_back(f32_tensor("optim/" + name, whole(values)));
  for (const auto& [name, values] : parts.compress.state_tensors()) f.tensors.push_back(f32_tensor(name, values));
  f.metadata["format"] = kFormat;

  // metrics.jsonl reaches the disk first, so that it never ends before the checkpoint's step.
  std::error_code exists_ec;
  if (root && fs::exists(dir + "/metrics.jsonl", exists_ec)) sync_path(dir + "/metrics.jsonl", false);
  // Every rank's shard is on disk before checkpoint.json names it (run_shards.h).
  std::optional<ShardLayout> shards;
  if (parts.sharded) shards = write_state_shards(dir, progress.step, *parts.sharded, parts.opt);
  if (!root) return;
  const std::string name = tensors_name(progress.step);
  const std::string tensors_path = dir + "/" + name;
  write_safetensors(tensors_path, f);
  sync_path(tensors_path, false);
  sync_path(dir, true);
  const auto [bytes, crc] = file_size_and_crc32(tensors_path);

  const LossScaler::State ls = parts.scaler.state();
  Json j = {{"format", kFormat}, {"version", kVersion}};
  j.update(progress_json(progress));
  j["loss_scaler"] = {
      {"scale", ls.scale}, {"good", ls.good}, {"skipped", ls.skipped}, {"consecutive_skips", ls.consecutive_skips}};
  j["data"] = parts.task.data_state();
  j["model_random"] = parts.model.random_state();
  j["config"] = config.to_json();
  j["tensors"] = {{"file", name}, {"bytes", bytes}, {"crc32", crc}};
  if (shards) j["shards"] = shard_layout_json(*shards);

  const std::string path = dir + "/checkpoint.json", tmp = path + ".part";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw Error(tmp + ": cannot write the checkpoint (" + std::strerror(errno) + ")");
    out << j.dump(1) << "\n";
    out.flush();
    if (!out) throw Error(tmp + ": write failed (disk full?)");
  }
  sync_path(tmp, false);
  rename_durably(tmp, path, dir);

  // The new checkpoint is in place: the tensors of older ones (and any a crash left) can go.
  std::vector<fs::path> old;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    const bool part = n.rfind("checkpoint-", 0) == 0 && n.size() > 5 && n.compare(n.size() - 5, 5, ".part") == 0;
    bool current = n == name;
    if (shards)
      for (const ShardFile& s : shards->files) current = current || n == s.file;
    if (!current && (is_tensors_name(n) || is_shard_file_name(n) || part)) old.push_back(it->path());
  }
  for (const fs::path& p : old) fs::remove(p, ec);
}

RunProgress restore_run_checkpoint(const std::string& dir, const Config& config, const RunParts& parts) {
  const std::optional<RunCheckpointInfo> info = read_run_checkpoint(dir);
  if (!info) throw Error(dir + " has no checkpoint (checkpoint.json)");
  const std::string origin = dir + "/checkpoint.json";
  const Config saved = checkpoint_config(*info, origin);
  for (const std::string& k : Config::differences(saved, config))
    if (!may_differ_on_resume(k))
      throw Error(origin + " was written by a run with another " + k + " than the one being resumed");

  const std::string path = dir + "/" + info->tensors_file;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(path + " is missing: " + origin + " needs it");
  const auto [bytes, crc] = file_size_and_crc32(path);
  if (bytes != info->tensors_bytes || crc != info->tensors_crc32)
    throw Error(path + " does not match " + origin + " (its size or CRC-32 differs): the file was changed or damaged");
  const SafeTensorsFile f = read_safetensors(path);

  std::vector<Parameter*> params = parts.model.parameters();
  const FlatParams flat(params);
  // The checkpoint holds the whole model's state; a tensor-parallel rank cuts its shards from it.
  const int64_t stored = parts.tensor ? dist::whole_numel(params) : flat.numel();
  std::vector<float> master;
  std::map<std::string, std::vector<float>> optim, compress;
  for (const SafeTensor& t : f.tensors) {
    if (t.name == "master" && !info->shards) {
      master = f32_values(t, stored, path);
    } else if (t.name.rfind("optim/", 0) == 0 && !info->shards) {
      optim[t.name.substr(6)] = f32_values(t, stored, path);
    } else if (t.name.rfind("mask/", 0) == 0 || t.name.rfind("rewind/", 0) == 0) {
      const Parameter* p = parts.model.find_parameter(t.name.substr(t.name.find('/') + 1));
      if (!p) throw Error(path + ": tensor '" + t.name + "' names no parameter of the model");
      compress[t.name] = f32_values(t, p->numel(), path);
    } else {
      throw Error(path + ": tensor '" + t.name + "' is not part of a run checkpoint");
    }
  }
  if (!info->shards && master.empty() && flat.numel() > 0)
    throw Error(path + ": tensor 'master' (the weights) is missing");
  // The range of the masters and optimizer state this rank keeps: its ZeRO shard, else all.
  if (parts.tensor && parts.sharded)
    throw Error(origin + ": a run with dist.tp > 1 and a ZeRO dist.strategy does not resume from a checkpoint (use "
                "dist.strategy ddp)");
  const dist::ShardRange range = parts.sharded ? parts.sharded->state_range() : dist::ShardRange{0, stored};
  if (info->shards) {
    if (info->shards->elements != stored)
      throw Error(origin + ": shards: field 'elements' is " + std::to_string(info->shards->elements) +
                  "; the model has " + std::to_string(stored) + " parameters");
    StateSlice slice = read_state_slice(dir, *info->shards, range);
    master = std::move(slice.master);
    optim = std::move(slice.optim);
  }
  if (parts.tensor) {  // this rank's shards of the whole state
    master = dist::take_local_flat(params, parts.tensor->size(), parts.tensor->rank(), master);
    for (auto& [name, values] : optim) values = dist::take_local_flat(params, parts.tensor->size(), parts.tensor->rank(), values);
  } else if (parts.sharded && !info->shards) {  // a whole checkpoint: this rank's range of it
    const auto cut = [&](std::vector<float>& v) {
      v = std::vector<float>(v.begin() + range.begin, v.begin() + range.end);
    };
    cut(master);
    for (auto& [name, values] : optim) cut(values);
  }

  try {
    // Masks first (installing one zeroes pruned masters), then the masters as saved, then the
    // compute copies rounded from them, as every optimizer step leaves them.
    parts.compress.restore_state(compress);
    if (parts.sharded) {
      parts.sharded->restore_state(parts.opt, master, optim);
    } else {
      for (size_t i = 0; i < params.size(); ++i)
        parts.be.upload(params[i]->master, master.data() + flat.offset(i), DType::F32);
      for (Parameter* p : params)
        if (p->value.defined() && !p->value.same_storage(p->master)) parts.be.copy(p->master, p->value);
      parts.opt.load_state(parts.be, params, optim);
    }
    parts.scaler.restore(info->loss_scaler);
    parts.task.restore_data_state(info->data);
    parts.model.set_random_state(info->model_random);
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
  parts.be.invalidate_captures();
  return info->progress;
}

Config resume_config(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": no such run folder");
  bool found = false;
  const std::string config_path = dir + "/config.json";
  const std::string config_text = read_file_text(config_path, found);
  if (!found) throw Error(dir + " is not a run folder: it has no config.json");
  // Read as a config file is (config/json_text.h: plain-word errors with line and column, and
  // key lines), so --resume, the app and --config report a bad file the same way.
  const Config start = Config::from_text(config_text, config_path);

  const std::string summary_text = read_file_text(dir + "/summary.json", found);
  if (found) {
    const Json s = Json::parse(summary_text, nullptr, false);
    const std::string status =
        s.is_object() && s.contains("status") && s["status"].is_string() ? s["status"].get<std::string>() : "";
    if (status == "completed")
      throw Error(dir + " holds a completed run (summary.json: status completed); there is nothing to resume");
    if (status == "diverged")
      throw Error(dir +
                  " holds a diverged run (summary.json: status diverged); resuming it would repeat the same steps");
  }

  const std::optional<RunCheckpointInfo> info = read_run_checkpoint(dir);
  if (!info) {
    const int64_t every = start.get_int("run.checkpoint_every");
    if (every == 0) throw Error(dir + " has no checkpoint: the run was started with run.checkpoint_every = 0");
    throw Error(dir + " has no checkpoint yet: the run ended before step " + std::to_string(every) +
                ", its first checkpoint (run.checkpoint_every = " + std::to_string(every) + ")");
  }
  const std::string origin = dir + "/checkpoint.json";
  Config c = checkpoint_config(*info, origin);
  for (const std::string& k : Config::differences(start, c))
    if (!may_differ_from_start(k))
      throw Error(origin + " does not belong to " + config_path + ": the two differ in " + k +
                  ", which cannot change during a run");
  c.set_json("run.out", dir);
  return c;
}

size_t metrics_bytes_to_keep(std::string_view text, long step, long& last_step) {
  size_t pos = 0, keep = 0;
  last_step = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;  // a torn last line
    const Json line = Json::parse(text.substr(pos, nl - pos), nullptr, false);
    const auto st = line.is_object() ? line.find("step") : line.end();
    if (st != line.end() && st->is_number_integer()) {
      if (st->get<int64_t>() > step) break;
      last_step = static_cast<long>(st->get<int64_t>());
    }
    pos = keep = nl + 1;
  }
  return keep;
}

long truncate_metrics(const std::string& path, long step) {
  bool found = false;
  const std::string text = read_file_text(path, found);
  if (!found) {
    std::ofstream create(path, std::ios::app);
    if (!create) throw Error(path + ": cannot be created");
    return 0;
  }
  long last = 0;
  const size_t keep = metrics_bytes_to_keep(text, step, last);
  if (keep != text.size()) {
    std::error_code ec;
    fs::resize_file(path, keep, ec);
    if (ec)
      throw Error(path + ": cannot cut the metrics back to step " + std::to_string(step) + " (" + ec.message() + ")");
  }
  return last;
}

}  // namespace trainlab
