// Classification data sets held in host memory as fp32 features and int32 labels, and the
// readers that fill them: the shipped 8x8 digits (CSV in gzip) and IDX files (MNIST format,
// gzip or plain), e.g. Fashion-MNIST from Debian's dataset-fashion-mnist.
//
// Each reader reads the file through data_file.h (regular files only, bounded, gunzipped) and then
// parses the bytes with a byte-based parser (what the fuzz targets call). The parsers check every
// size and shape against the bytes present before allocating, with overflow-checked arithmetic,
// and every label against the class count; an error names the file, the line/column, item or
// header field, and what was expected, and never repeats the file's bytes.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace trainlab {

struct ClassificationData {
  std::string name;
  std::vector<float> x;    // n * features, row-major
  std::vector<int32_t> y;  // n
  int64_t features = 0;
  int64_t classes = 0;
  int64_t size() const { return static_cast<int64_t>(y.size()); }
  // The rows `idx` as a new data set.
  ClassificationData subset(const std::vector<int64_t>& idx) const;
};

struct TrainTestSplit {
  ClassificationData train, test;
};

// 8x8 digits: one sample a line, 64 integers in [0, 16] then the label in [0, 9], comma-separated
// (blank lines skipped, CRLF accepted). Features scaled by 1/16.
ClassificationData read_digits_csv(const std::string& path);
ClassificationData parse_digits_csv(std::string_view text, const std::string& origin);

// IDX images (magic 0x00000803: unsigned bytes in 3 dimensions, n x rows x cols, big-endian sizes;
// pixels scaled by 1/255) and labels (0x00000801: n bytes, each a class in [0, kIdxClasses)). The
// files must hold exactly the bytes their headers describe, n >= 1, the images at most
// kMaxIdxPixels pixels, and both files the same n.
constexpr int64_t kIdxClasses = 10;
constexpr int64_t kMaxIdxPixels = 256 * 256;
ClassificationData read_idx(const std::string& images_path, const std::string& labels_path, const std::string& name);
ClassificationData parse_idx(std::string_view images, std::string_view labels, const std::string& images_origin,
                             const std::string& labels_origin, const std::string& name);

// The four files of an MNIST-format data set in a folder, as the trainer reads them (each
// gzip-compressed or plain): train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte.
struct IdxFolder {
  std::string dir;
  std::vector<std::string> found;    // paths of the files present
  std::vector<std::string> missing;  // names (without .gz) of the files absent
  bool complete() const { return missing.empty(); }
  bool empty() const { return found.empty(); }
};
IdxFolder scan_idx_folder(const std::string& dir);
// Throws Error when the folder does not hold all four files, naming the ones missing (a partial
// download or copy) or saying that it holds none.
void check_idx_folder(const std::string& dir);
// Folders searched for Fashion-MNIST when no folder is given, in order: data/fashion-mnist under
// each resource root (TRAINLAB_DATA_DIR first, see util/paths.h), then Debian's
// /usr/share/datasets/fashion-mnist (package dataset-fashion-mnist).
std::vector<std::string> fashion_mnist_dirs();
// The first of those folders that holds all four files ("" when Fashion-MNIST is not installed).
std::string find_fashion_mnist();

// Seeded shuffle and split: the first floor(n * (1 - test_fraction)) shuffled rows train.
TrainTestSplit split_train_test(const ClassificationData& all, double test_fraction, uint64_t seed);

// A permutation of 0..n-1 from a portable Fisher-Yates shuffle (same order on every platform).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

}  // namespace trainlab
