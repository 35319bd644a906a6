#include "data/dataset.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "data/data_file.h"
#include "util/error.h"
#include "util/paths.h"

namespace trainlab {

ClassificationData ClassificationData::subset(const std::vector<int64_t>& idx) const {
  ClassificationData out;
  out.name = name;
  out.features = features;
  out.classes = classes;
  out.x.resize(idx.size() * static_cast<size_t>(features));
  out.y.resize(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    std::memcpy(&out.x[i * features], &x[static_cast<size_t>(idx[i] * features)], sizeof(float) * features);
    out.y[i] = y[static_cast<size_t>(idx[i])];
  }
  return out;
}

ClassificationData read_digits_csv(const std::string& path) {
  const std::string text = read_maybe_gzip(path);
  ClassificationData d;
  d.name = "digits";
  d.features = 64;
  d.classes = 10;
  size_t pos = 0;
  long line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    int col = 0;
    size_t p = 0;
    while (true) {
      size_t comma = line.find(',', p);
      std::string field = line.substr(p, comma == std::string::npos ? std::string::npos : comma - p);
      ++col;
      if (col > 65) throw Error(where + ": expected 65 comma-separated values (64 pixels and a label), found more");
      char* endp = nullptr;
      errno = 0;
      const long v = std::strtol(field.c_str(), &endp, 10);
      while (endp && (*endp == ' ' || *endp == '\t')) ++endp;
      if (field.empty() || endp == field.c_str() || *endp != '\0' || errno)
        throw Error(where + ", column " + std::to_string(col) + ": '" + field + "' is not an integer");
      if (col <= 64) {
        if (v < 0 || v > 16)
          throw Error(where + ", column " + std::to_string(col) + ": pixel value " + std::to_string(v) +
                      " is outside 0..16");
        d.x.push_back(static_cast<float>(v) / 16.0f);
      } else {
        if (v < 0 || v > 9)
          throw Error(where + ", column 65: label " + std::to_string(v) + " is outside 0..9");
        d.y.push_back(static_cast<int32_t>(v));
      }
      if (comma == std::string::npos) break;
      p = comma + 1;
    }
    if (col != 65)
      throw Error(where + ": expected 65 comma-separated values (64 pixels and a label), found " + std::to_string(col));
  }
  if (d.y.empty()) throw Error(path + ": no samples found");
  return d;
}

namespace {
uint32_t be32(const std::string& s, size_t off) {
  return (static_cast<uint32_t>(static_cast<unsigned char>(s[off])) << 24) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[off + 1])) << 16) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[off + 2])) << 8) |
         static_cast<uint32_t>(static_cast<unsigned char>(s[off + 3]));
}
}  // namespace

ClassificationData read_idx(const std::string& images_path, const std::string& labels_path, const std::string& name) {
  const std::string img = read_maybe_gzip(images_path);
  const std::string lab = read_maybe_gzip(labels_path);
  if (img.size() < 16 || be32(img, 0) != 0x00000803)
    throw Error(images_path + ": not an IDX image file (expected magic number 0x00000803 and a 16-byte header)");
  if (lab.size() < 8 || be32(lab, 0) != 0x00000801)
    throw Error(labels_path + ": not an IDX label file (expected magic number 0x00000801 and an 8-byte header)");
  const uint32_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  const uint32_t nl = be32(lab, 4);
  if (n != nl)
    throw Error(images_path + " has " + std::to_string(n) + " images but " + labels_path + " has " + std::to_string(nl) +
                " labels");
  const size_t px = static_cast<size_t>(rows) * cols;
  if (img.size() < 16 + px * n)
    throw Error(images_path + ": truncated (header promises " + std::to_string(n) + " images of " +
                std::to_string(rows) + "x" + std::to_string(cols) + ")");
  if (lab.size() < 8 + static_cast<size_t>(n)) throw Error(labels_path + ": truncated");
  ClassificationData d;
  d.name = name;
  d.features = static_cast<int64_t>(px);
  d.classes = 10;
  d.x.resize(px * n);
  d.y.resize(n);
  for (size_t i = 0; i < px * n; ++i) d.x[i] = static_cast<float>(static_cast<unsigned char>(img[16 + i])) / 255.0f;
  for (uint32_t i = 0; i < n; ++i) {
    const int v = static_cast<unsigned char>(lab[8 + i]);
    if (v > 9) throw Error(labels_path + ": label " + std::to_string(v) + " of item " + std::to_string(i) + " is outside 0..9");
    d.y[i] = v;
  }
  return d;
}

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

TrainTestSplit split_train_test(const ClassificationData& all, double test_fraction, uint64_t seed) {
  if (!(test_fraction > 0.0 && test_fraction < 1.0))
    throw Error("data.test_fraction must be between 0 and 1 (exclusive), got " + std::to_string(test_fraction));
  auto perm = seeded_permutation(all.size(), seed);
  const auto n_train = static_cast<size_t>(static_cast<double>(all.size()) * (1.0 - test_fraction));
  std::vector<int64_t> tr(perm.begin(), perm.begin() + static_cast<long>(n_train));
  std::vector<int64_t> te(perm.begin() + static_cast<long>(n_train), perm.end());
  return {all.subset(tr), all.subset(te)};
}

namespace {
const char* const kIdxStems[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                 "t10k-labels-idx1-ubyte"};
}  // namespace

IdxFolder scan_idx_folder(const std::string& dir) {
  namespace fs = std::filesystem;
  IdxFolder f;
  f.dir = dir;
  for (const char* stem : kIdxStems) {
    std::string hit;
    for (const char* suffix : {".gz", ""}) {
      std::error_code ec;
      const fs::path p = fs::path(dir) / (std::string(stem) + suffix);
      if (fs::is_regular_file(p, ec)) {
        hit = p.string();
        break;
      }
    }
    if (hit.empty())
      f.missing.push_back(stem);
    else
      f.found.push_back(hit);
  }
  return f;
}

void check_idx_folder(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) throw Error("data.path '" + dir + "' is not a folder (IDX data sets are folders of four files)");
  const IdxFolder f = scan_idx_folder(dir);
  if (f.complete()) return;
  std::string missing;
  for (const auto& m : f.missing) missing += (missing.empty() ? "" : ", ") + m + "(.gz)";
  if (f.empty())
    throw Error("data.path '" + dir + "' holds no IDX files: expected " + missing);
  throw Error("data.path '" + dir + "' holds only part of an IDX data set: " + missing + " " +
              (f.missing.size() == 1 ? "is" : "are") + " missing (an interrupted download or copy?)");
}

std::vector<std::string> fashion_mnist_dirs() {
  std::vector<std::string> d;
  for (const auto& root : resource_roots()) d.push_back((std::filesystem::path(root) / "data" / "fashion-mnist").string());
  d.push_back("/usr/share/datasets/fashion-mnist");
  return d;
}

std::string find_fashion_mnist() {
  for (const auto& d : fashion_mnist_dirs())
    if (scan_idx_folder(d).complete()) return d;
  return {};
}

}  // namespace trainlab
