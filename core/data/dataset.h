// Classification data sets held in host memory as fp32 features and int32 labels, and the
// readers that fill them: the shipped 8x8 digits (CSV in gzip) and IDX files (MNIST format,
// gzip or plain), e.g. Fashion-MNIST from Debian's dataset-fashion-mnist.
#pragma once
#include <cstdint>
#include <random>
#include <string>
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

// Reads a whole file, gunzipping it when it is gzip (plain files pass through). Throws Error
// naming the file for a missing, unreadable or truncated file.
std::string read_maybe_gzip(const std::string& path);

// 8x8 digits: one sample a line, 64 integers 0..16 then the label 0..9. Features scaled by 1/16.
ClassificationData read_digits_csv(const std::string& path);
// IDX images (magic 0x00000803, uint8 pixels scaled by 1/255) and labels (0x00000801).
ClassificationData read_idx(const std::string& images_path, const std::string& labels_path, const std::string& name);

// Seeded shuffle and split: the first floor(n * (1 - test_fraction)) shuffled rows train.
TrainTestSplit split_train_test(const ClassificationData& all, double test_fraction, uint64_t seed);

// A permutation of 0..n-1 from a portable Fisher-Yates shuffle (same order on every platform).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

}  // namespace trainlab
