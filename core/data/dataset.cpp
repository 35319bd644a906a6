#include "data/dataset.h"

#include <algorithm>
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

namespace {

// A cell of the digits CSV: an optionally signed decimal integer, blanks around it allowed. False
// for anything else; magnitudes past 10^6 saturate (every range checked afterwards is far smaller).
bool parse_cell(std::string_view cell, long& value) {
  size_t i = 0, n = cell.size();
  while (i < n && (cell[i] == ' ' || cell[i] == '\t')) ++i;
  while (n > i && (cell[n - 1] == ' ' || cell[n - 1] == '\t')) --n;
  bool negative = false;
  if (i < n && (cell[i] == '+' || cell[i] == '-')) negative = cell[i++] == '-';
  if (i == n) return false;
  long v = 0;
  for (; i < n; ++i) {
    if (cell[i] < '0' || cell[i] > '9') return false;
    v = std::min(v * 10 + (cell[i] - '0'), 1000000L);
  }
  value = negative ? -v : v;
  return true;
}

}  // namespace

ClassificationData read_digits_csv(const std::string& path) { return parse_digits_csv(read_maybe_gzip(path), path); }

ClassificationData parse_digits_csv(std::string_view text, const std::string& origin) {
  constexpr int kPixels = 64, kColumns = kPixels + 1, kMaxPixel = 16;
  ClassificationData d;
  d.name = "digits";
  d.features = kPixels;
  d.classes = 10;
  size_t pos = 0;
  long line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const auto where = [&] { return origin + ":" + std::to_string(line_no); };
    int col = 0;
    size_t p = 0;
    while (true) {
      const size_t comma = line.find(',', p);
      const std::string_view cell =
          line.substr(p, comma == std::string_view::npos ? std::string_view::npos : comma - p);
      ++col;
      if (col > kColumns)
        throw Error(where() + ": expected 65 comma-separated values (64 pixels and a label), found more");
      const bool is_label = col == kColumns;
      const std::string range = is_label ? "[0, " + std::to_string(d.classes - 1) + "]" : "[0, 16]";
      long v = 0;
      if (!parse_cell(cell, v))
        throw Error(where() + ", column " + std::to_string(col) + ": not an integer (expected " +
                    (is_label ? "a label" : "a pixel value") + " in " + range + ")");
      if (!is_label) {
        if (v < 0 || v > kMaxPixel)
          throw Error(where() + ", column " + std::to_string(col) + ": pixel value outside " + range +
                      " (expected an integer in " + range + ")");
        d.x.push_back(static_cast<float>(v) / 16.0f);
      } else {
        if (v < 0 || v >= d.classes)
          throw Error(where() + ", column 65: label outside " + range + " (expected one of the " +
                      std::to_string(d.classes) + " classes, an integer in " + range + ")");
        d.y.push_back(static_cast<int32_t>(v));
      }
      if (comma == std::string_view::npos) break;
      p = comma + 1;
    }
    if (col != kColumns)
      throw Error(where() + ": expected 65 comma-separated values (64 pixels and a label), found " +
                  std::to_string(col));
  }
  if (d.y.empty()) throw Error(origin + ": no samples found (expected lines of 64 pixels and a label)");
  return d;
}

namespace {

uint64_t be32(std::string_view s, size_t off) {
  return (static_cast<uint64_t>(static_cast<unsigned char>(s[off])) << 24) |
         (static_cast<uint64_t>(static_cast<unsigned char>(s[off + 1])) << 16) |
         (static_cast<uint64_t>(static_cast<unsigned char>(s[off + 2])) << 8) |
         static_cast<uint64_t>(static_cast<unsigned char>(s[off + 3]));
}

// The file holds exactly `header` + `count` x `item` bytes, or Error says what its header describes.
void check_idx_size(std::string_view bytes, uint64_t header, uint64_t count, uint64_t item, const std::string& origin,
                    const std::string& described) {
  uint64_t data = 0, total = 0;
  const bool overflow = __builtin_mul_overflow(count, item, &data) || __builtin_add_overflow(data, header, &total);
  if (!overflow && total == bytes.size()) return;
  const std::string expected =
      "expected " + std::to_string(header) + " + " + std::to_string(count) + " x " + std::to_string(item) + " = " +
      (overflow ? std::string("more bytes than a file can hold") : std::to_string(total) + " bytes");
  if (overflow || bytes.size() < total)
    throw Error(origin + ": truncated: " + std::to_string(bytes.size()) + " bytes, its header describes " + described +
                " (" + expected + ")");
  throw Error(origin + ": " + std::to_string(bytes.size()) + " bytes, more than its header describes: " + described +
              " (" + expected + ")");
}

}  // namespace

ClassificationData read_idx(const std::string& images_path, const std::string& labels_path, const std::string& name) {
  const std::string img = read_maybe_gzip(images_path);
  const std::string lab = read_maybe_gzip(labels_path);
  return parse_idx(img, lab, images_path, labels_path, name);
}

ClassificationData parse_idx(std::string_view img, std::string_view lab, const std::string& images_path,
                             const std::string& labels_path, const std::string& name) {
  if (img.size() < 16 || be32(img, 0) != 0x00000803)
    throw Error(images_path + ": not an IDX image file (expected magic number 0x00000803 and a 16-byte header)");
  if (lab.size() < 8 || be32(lab, 0) != 0x00000801)
    throw Error(labels_path + ": not an IDX label file (expected magic number 0x00000801 and an 8-byte header)");
  const uint64_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12), nl = be32(lab, 4);
  if (n == 0) throw Error(images_path + ": header: 0 images (expected at least 1)");
  const std::string size = std::to_string(rows) + "x" + std::to_string(cols);
  if (rows == 0 || cols == 0)
    throw Error(images_path + ": header: images of " + size + " (expected at least 1 row and 1 column)");
  const uint64_t px = rows * cols;  // both < 2^32: no overflow
  if (px > static_cast<uint64_t>(kMaxIdxPixels))
    throw Error(images_path + ": header: images of " + size + " (expected at most " + std::to_string(kMaxIdxPixels) +
                " pixels an image)");
  check_idx_size(img, 16, n, px, images_path, std::to_string(n) + " images of " + size);
  check_idx_size(lab, 8, nl, 1, labels_path, std::to_string(nl) + " labels");
  if (n != nl)
    throw Error(images_path + " has " + std::to_string(n) + " images but " + labels_path + " has " +
                std::to_string(nl) + " labels (expected one label an image)");
  const std::string range = "[0, " + std::to_string(kIdxClasses - 1) + "]";
  for (uint64_t i = 0; i < n; ++i)
    if (static_cast<unsigned char>(lab[8 + i]) >= kIdxClasses)
      throw Error(labels_path + ": item " + std::to_string(i) + ": label outside " + range + " (expected one of the " +
                  std::to_string(kIdxClasses) + " classes, an integer in " + range + ")");
  ClassificationData d;
  d.name = name;
  d.features = static_cast<int64_t>(px);
  d.classes = kIdxClasses;
  d.x.resize(px * n);
  d.y.resize(n);
  for (size_t i = 0; i < px * n; ++i) d.x[i] = static_cast<float>(static_cast<unsigned char>(img[16 + i])) / 255.0f;
  for (size_t i = 0; i < n; ++i) d.y[i] = static_cast<unsigned char>(lab[8 + i]);
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
