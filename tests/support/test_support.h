// Helpers shared by the unit tests: temporary data files (plain and gzip, written with zlib),
// host <-> tensor shortcuts, a run of the trainer into a folder, and reading a run record back.
#pragma once
#include <zlib.h>

#include <QByteArray>
#include <QString>
#include <QTemporaryDir>
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/config.h"
#include "train/metrics.h"
#include "train/run_record.h"
#include "train/trainer.h"
#include "util/error.h"

namespace trainlab::test {

// Writes `text` to `path`, gzip-compressed with zlib.
inline void write_gzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw Error("test: cannot create " + path);
  if (!text.empty()) gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One well-formed digits CSV line: 64 pixels 0..16 and a label 0..9.
inline std::string digits_line(int seed, int label) {
  std::string s;
  for (int i = 0; i < 64; ++i) s += std::to_string((seed * 7 + i * 3) % 17) + ",";
  return s + std::to_string(label);
}

// `rows` well-formed lines (enough for a tiny training run with batch <= rows * 0.8).
inline std::string digits_csv(int rows) {
  std::string s;
  for (int r = 0; r < rows; ++r) s += digits_line(r, r % 10) + "\n";
  return s;
}

inline std::vector<float> download_f32(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.download(t, v.data(), DType::F32);
  return v;
}

inline Tensor upload_f32(Backend& be, const std::vector<float>& v, const Shape& shape,
                         MemCategory c = MemCategory::Activations) {
  Tensor t = be.empty(shape, DType::F32, c);
  be.upload(t, v.data(), DType::F32);
  return t;
}

inline std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A config for a short CPU run of the digits MLP writing into `out`.
inline Config digits_config(const std::string& out, long steps = 0, long epochs = 30) {
  Config c;
  c.set("device.name", "cpu");
  c.set("model.name", "digits-mlp");
  c.set("train.epochs", std::to_string(epochs));
  c.set("train.steps", std::to_string(steps));
  c.set("train.seed", "1");
  c.set("run.out", out);
  return c;
}

// Every step of a run's record as a reader sees it (load_run: steps.bin's rows merged with the
// metrics.jsonl lines, the slow fields carried forward), one JSON object a step (StepMetrics::to_json,
// through its text: no value (NaN) reads as null, as in the file).
inline std::vector<Json> metrics_lines(const std::string& dir) {
  std::vector<Json> out;
  for (const StepMetrics& m : load_run(dir).steps) out.push_back(Json::parse(m.to_json().dump()));
  return out;
}

inline Json read_json(const std::string& path) { return Json::parse(read_text(path)); }

// The message of the trainlab::Error that `fn` throws ("" when it throws none).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

inline QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace trainlab::test
