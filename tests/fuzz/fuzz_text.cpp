// Fuzz target `text`: text bytes through UTF-8 decoding, vocabulary building and the train/val
// split (data/text.h text_corpus_from_bytes), with a chunk of 1..64 characters (the first byte), a
// val_fraction in [0.01, 0.98] (the second) and a seed (the third) so that short inputs reach the
// split. A corpus that loads must be consistent: its vocabulary ascending, distinct and stored as
// UTF-8 that reads back (TextCorpus::from_vocabulary, CharGptConfig::validate), every token in
// the vocabulary, the text encoding to the tokens and decoding back, and every window inside a
// chunk. The same bytes are also tried as a prompt for that vocabulary.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

#include "data/text.h"
#include "nn/transformer.h"
#include "util/error.h"
#include "util/utf8.h"

namespace {

using namespace trainlab;

void check_split(const TokenSplit& s, int64_t vocab, int64_t chunk, std::mt19937_64& rng) {
  int64_t begin = 0;
  for (const int64_t end : s.chunk_end) {
    if (end <= begin || end - begin > chunk) __builtin_trap();
    begin = end;
  }
  if (begin != static_cast<int64_t>(s.tokens.size())) __builtin_trap();
  for (const int32_t t : s.tokens)
    if (t < 0 || t >= vocab) __builtin_trap();
  for (int64_t ctx = 1; ctx <= chunk; ctx += 7) {
    const int64_t n = s.window_count(ctx);
    if (n < 0) __builtin_trap();
    if (n == 0) continue;
    for (int k = 0; k < 4; ++k) {
      const int64_t start = k < 3 ? s.window_start(static_cast<int64_t>(rng() % static_cast<uint64_t>(n)), ctx)
                                  : s.random_window(rng, ctx);
      // ctx inputs and one target, all inside the chunk that holds the start
      const auto end = std::upper_bound(s.chunk_end.begin(), s.chunk_end.end(), start);
      if (start < 0 || end == s.chunk_end.end() || start + ctx >= *end) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const int64_t chunk = 1 + data[0] % 64;
  const double val_fraction = (1 + data[1] % 98) / 100.0;
  const uint64_t seed = data[2];
  const std::string text(reinterpret_cast<const char*>(data) + 3, size - 3);
  TextCorpus c;
  try {
    c = text_corpus_from_bytes(text, "text", val_fraction, seed, chunk);
  } catch (const Error&) {
    return 0;  // the clear-error outcome
  }
  for (std::size_t i = 1; i < c.chars.size(); ++i)
    if (c.chars[i - 1] >= c.chars[i]) __builtin_trap();
  const std::string stored = c.chars_utf8();
  if (utf8_invalid_offset(stored) != std::string::npos) __builtin_trap();
  if (TextCorpus::from_vocabulary(stored, "vocabulary").chars != c.chars) __builtin_trap();
  CharGptConfig cfg;
  cfg.vocab = c.vocab();
  cfg.chars = stored;
  cfg.validate();  // a vocabulary the lab built is one it accepts from a weights file
  std::mt19937_64 rng(seed);
  check_split(c.train, c.vocab(), chunk, rng);
  check_split(c.val, c.vocab(), chunk, rng);
  if (c.train.tokens.size() + c.val.tokens.size() != decode_utf8(text, "text").size()) __builtin_trap();
  if (c.decode(c.encode(text)) != text) __builtin_trap();
  try {
    for (const int32_t t : c.encode(text.substr(0, text.size() / 2), "the prompt"))
      if (t < 0 || t >= c.vocab()) __builtin_trap();
  } catch (const Error&) {
    // half the text may end inside a character: a clear error
  }
  return 0;
}
