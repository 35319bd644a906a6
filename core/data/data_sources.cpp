#include "data/data_sources.h"

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

TrainTestSplit load_classification_data(const DataOptions& o) {
  std::string path = o.path;
  if (o.name == "digits") {
    if (path.empty()) path = find_resource("data/digits.csv.gz");
    return split_train_test(read_digits_csv(path), o.test_fraction, o.seed);
  }
  if (o.name == "fashion-mnist" || o.name == "idx") {
    if (path.empty()) {
      if (o.name == "idx") throw Error("data.name=idx needs data.path: a folder with train-images-idx3-ubyte(.gz) etc.");
      path = "/usr/share/datasets/fashion-mnist";
      if (!fs::exists(path))
        throw Error("Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist (or set data.path)");
    }
    TrainTestSplit s;
    const std::string train_images = idx_file(path, "train-images-idx3-ubyte");
    const std::string test_images = idx_file(path, "t10k-images-idx3-ubyte");
    s.train = read_idx(train_images, idx_file(path, "train-labels-idx1-ubyte"), o.name);
    s.test = read_idx(test_images, idx_file(path, "t10k-labels-idx1-ubyte"), o.name);
    if (s.test.features != s.train.features)
      throw Error(test_images + ": images of " + std::to_string(s.test.features) + " pixels, but " + train_images +
                  " has images of " + std::to_string(s.train.features) + " (expected the same image size in both)");
    return s;
  }
  throw Error("data.name '" + o.name + "' is not a classification data set");
}

TextCorpus load_text_data(const DataOptions& o, const std::string* vocabulary) {
  std::string path = o.path;
  if (o.name == "text" && path.empty()) throw Error("data.name=text needs data.path: the text file to train on");
  if (o.name != "text" && o.name != "tinyshakespeare" && o.name != "kjv" && o.name != "digits")
    throw Error("model.name=char-gpt trains on text: data.name must be tinyshakespeare, kjv or text, not " + o.name);
  if (o.name == "kjv") path = find_resource("data/kjv.txt");
  else if (o.name != "text" || path.empty()) path = find_resource("data/tinyshakespeare.txt");
  return load_text_corpus(path, o.val_fraction, o.seed, vocabulary);
}

}  // namespace trainlab
