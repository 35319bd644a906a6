#include "train/data_setup.h"

#include <filesystem>

#include "util/error.h"
#include "util/paths.h"

namespace fs = std::filesystem;

namespace trainlab {

namespace {
std::string idx_file(const std::string& dir, const std::string& stem) {
  for (const char* suffix : {".gz", ""}) {
    const fs::path p = fs::path(dir) / (stem + suffix);
    if (fs::exists(p)) return p.string();
  }
  throw Error("data.path '" + dir + "': no " + stem + "(.gz) in this folder (expected MNIST-format IDX files)");
}
}  // namespace

TrainTestSplit load_classification_data(const Config& c) {
  const std::string name = c.get_string("data.name");
  std::string path = c.get_string("data.path");
  const auto seed = static_cast<uint64_t>(c.get_int("train.seed"));
  if (name == "digits") {
    if (path.empty()) path = find_resource("data/digits.csv.gz");
    return split_train_test(read_digits_csv(path), c.get_float("data.test_fraction"), seed);
  }
  if (name == "fashion-mnist" || name == "idx") {
    if (path.empty()) {
      if (name == "idx") throw Error("data.name=idx needs data.path: a folder with train-images-idx3-ubyte(.gz) etc.");
      path = "/usr/share/datasets/fashion-mnist";
      if (!fs::exists(path))
        throw Error("Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist (or set data.path)");
    }
    TrainTestSplit s;
    s.train = read_idx(idx_file(path, "train-images-idx3-ubyte"), idx_file(path, "train-labels-idx1-ubyte"), name);
    s.test = read_idx(idx_file(path, "t10k-images-idx3-ubyte"), idx_file(path, "t10k-labels-idx1-ubyte"), name);
    return s;
  }
  throw Error("data.name '" + name + "' is not a classification data set");
}

}  // namespace trainlab
