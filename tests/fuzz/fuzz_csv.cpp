// Fuzz target `csv`: digits CSV bytes (gzip or plain, as the file would hold them) through
// data/data_file.h maybe_gunzip (bounded here at 16 MiB) and data/dataset.h parse_digits_csv. A
// data set that parses must be consistent: 64 features and one label a sample, every feature in
// [0, 1], every label a class.
#include <cstdint>
#include <string_view>

#include "data/data_file.h"
#include "data/dataset.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const std::string text = trainlab::maybe_gunzip(bytes, "digits.csv", 16 << 20);
    const trainlab::ClassificationData d = trainlab::parse_digits_csv(text, "digits.csv");
    if (d.size() < 1 || d.features != 64 || d.x.size() != d.y.size() * 64) __builtin_trap();
    for (const std::int32_t y : d.y)
      if (y < 0 || y >= d.classes) __builtin_trap();
    for (const float x : d.x)
      if (!(x >= 0.0f && x <= 1.0f)) __builtin_trap();
  } catch (const trainlab::Error&) {
    // The clear-error outcome.
  }
  return 0;
}
