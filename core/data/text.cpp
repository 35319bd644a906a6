#include "data/text.h"

#include <algorithm>
#include <cmath>

#include "data/data_file.h"
#include "data/dataset.h"
#include "util/error.h"

namespace trainlab {

int64_t TokenSplit::window_count(int64_t ctx) const {
  int64_t n = 0, begin = 0;
  for (int64_t end : chunk_end) {
    n += std::max<int64_t>(0, end - begin - ctx);
    begin = end;
  }
  return n;
}

int64_t TokenSplit::window_start(int64_t w, int64_t ctx) const {
  int64_t begin = 0;
  for (int64_t end : chunk_end) {
    const int64_t here = std::max<int64_t>(0, end - begin - ctx);
    if (w < here) return begin + w;
    w -= here;
    begin = end;
  }
  throw Error("internal: window index past the end of the split");
}

int64_t TokenSplit::random_window(std::mt19937_64& rng, int64_t ctx) const {
  const int64_t n = window_count(ctx);
  if (n <= 0) throw Error("no window of " + std::to_string(ctx) + " characters fits in the text split");
  return window_start(static_cast<int64_t>(rng() % static_cast<uint64_t>(n)), ctx);
}

std::vector<int32_t> TextCorpus::encode(const std::string& text) const {
  std::vector<int32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto p = chars.find(text[i]);
    if (p == std::string::npos) {
      std::string shown = text[i] == '\n' ? "\\n" : std::string(1, text[i]);
      throw Error("character '" + shown + "' at position " + std::to_string(i) +
                  " is not in the model's vocabulary of " + std::to_string(chars.size()) + " characters");
    }
    out.push_back(static_cast<int32_t>(p));
  }
  return out;
}

std::string TextCorpus::decode(const std::vector<int32_t>& tokens) const {
  std::string s;
  for (int32_t t : tokens) s += (t >= 0 && t < vocab()) ? chars[static_cast<size_t>(t)] : '?';
  return s;
}

TextCorpus load_text_corpus(const std::string& path, double val_fraction, uint64_t seed) {
  const std::string text = read_regular_file(path);
  if (text.size() < 2 * static_cast<size_t>(kTextChunk))
    throw Error(path + ": the text has " + std::to_string(text.size()) + " characters; at least " +
                std::to_string(2 * kTextChunk) + " are needed for a train/validation split");
  TextCorpus c;
  bool seen[256] = {};
  for (unsigned char ch : text) seen[ch] = true;
  for (int i = 0; i < 256; ++i)
    if (seen[i]) c.chars += static_cast<char>(i);
  int32_t lut[256];
  for (size_t i = 0; i < c.chars.size(); ++i) lut[static_cast<unsigned char>(c.chars[i])] = static_cast<int32_t>(i);

  const int64_t n = static_cast<int64_t>(text.size());
  const int64_t chunks = (n + kTextChunk - 1) / kTextChunk;
  int64_t n_val = static_cast<int64_t>(std::llround(val_fraction * static_cast<double>(chunks)));
  n_val = std::clamp<int64_t>(n_val, 1, chunks - 1);
  const std::vector<int64_t> perm = seeded_permutation(chunks, seed * 7919ULL + 17);
  std::vector<bool> is_val(static_cast<size_t>(chunks), false);
  for (int64_t i = 0; i < n_val; ++i) is_val[static_cast<size_t>(perm[static_cast<size_t>(i)])] = true;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    TokenSplit& s = is_val[static_cast<size_t>(ch)] ? c.val : c.train;
    const int64_t b = ch * kTextChunk, e = std::min(n, b + kTextChunk);
    for (int64_t i = b; i < e; ++i) s.tokens.push_back(lut[static_cast<unsigned char>(text[static_cast<size_t>(i)])]);
    s.chunk_end.push_back(static_cast<int64_t>(s.tokens.size()));
  }
  return c;
}

}  // namespace trainlab
