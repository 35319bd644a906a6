// Fuzz target `idx`: IDX image and label bytes through the parser (data/dataset.h parse_idx), each
// part gunzipped first when it starts with the gzip magic (data/data_file.h maybe_gunzip, bounded
// here at 16 MiB). The first two input bytes (little-endian) say how many of the remaining bytes
// are the images; the rest are the labels. A data set that parses must be consistent: one label an
// image, every label a class, every pixel in [0, 1].
#include <algorithm>
#include <cstdint>
#include <string_view>

#include "data/data_file.h"
#include "data/dataset.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t split = std::min<std::size_t>(data[0] | (data[1] << 8), size - 2);
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  try {
    const std::string images = trainlab::maybe_gunzip(rest.substr(0, split), "images", 16 << 20);
    const std::string labels = trainlab::maybe_gunzip(rest.substr(split), "labels", 16 << 20);
    const trainlab::ClassificationData d = trainlab::parse_idx(images, labels, "images", "labels", "idx");
    if (d.size() < 1 || d.features < 1 || d.x.size() != d.y.size() * static_cast<std::size_t>(d.features))
      __builtin_trap();
    for (const std::int32_t y : d.y)
      if (y < 0 || y >= d.classes) __builtin_trap();
    for (const float x : d.x)
      if (!(x >= 0.0f && x <= 1.0f)) __builtin_trap();
  } catch (const trainlab::Error&) {
    // The clear-error outcome.
  }
  return 0;
}
