#include "data/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "data/data_file.h"
#include "data/dataset.h"
#include "util/error.h"
#include "util/utf8.h"

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

std::string TextCorpus::chars_utf8() const { return encode_utf8(chars); }

namespace {
// The token of `cp` in an ascending vocabulary, or -1.
int32_t find_token(const std::u32string& chars, char32_t cp) {
  const auto it = std::lower_bound(chars.begin(), chars.end(), cp);
  return it != chars.end() && *it == cp ? static_cast<int32_t>(it - chars.begin()) : -1;
}
}  // namespace

std::vector<int32_t> TextCorpus::encode(const std::string& text, const std::string& origin) const {
  const std::u32string cps = decode_utf8(text, origin);
  std::vector<int32_t> out;
  out.reserve(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    const int32_t t = find_token(chars, cps[i]);
    if (t < 0)
      throw Error(origin + ": character " + describe_code_point(cps[i]) + " at position " + std::to_string(i) +
                  " is not in the model's vocabulary of " + std::to_string(chars.size()) + " characters");
    out.push_back(t);
  }
  return out;
}

std::string TextCorpus::decode(const std::vector<int32_t>& tokens) const {
  std::string s;
  s.reserve(tokens.size());
  for (int32_t t : tokens) append_utf8(s, (t >= 0 && t < vocab()) ? chars[static_cast<size_t>(t)] : U'\uFFFD');
  return s;
}

TextCorpus TextCorpus::from_vocabulary(std::string_view utf8, const std::string& origin) {
  TextCorpus c;
  c.chars = decode_utf8(utf8, origin);
  for (size_t i = 1; i < c.chars.size(); ++i)
    if (c.chars[i - 1] >= c.chars[i])
      throw Error(origin + ": character " + std::to_string(i) +
                  " repeats or is out of order (expected distinct characters in ascending code point order)");
  if (c.chars.size() > static_cast<size_t>(kMaxTextVocab))
    throw Error(origin + ": " + std::to_string(c.chars.size()) + " characters (expected at most " +
                std::to_string(kMaxTextVocab) + ")");
  return c;
}

TextCorpus load_text_corpus(const std::string& path, double val_fraction, uint64_t seed,
                            const std::string* vocabulary) {
  return text_corpus_from_bytes(read_regular_file(path), path, val_fraction, seed, kTextChunk, vocabulary);
}

namespace {
// The distinct characters of `text`, ascending.
std::u32string vocabulary_of(const std::u32string& text) {
  bool ascii[128] = {};
  std::u32string other;
  for (char32_t cp : text) {
    if (cp < 128)
      ascii[cp] = true;
    else
      other.push_back(cp);
  }
  std::sort(other.begin(), other.end());
  other.erase(std::unique(other.begin(), other.end()), other.end());
  std::u32string chars;
  for (char32_t cp = 0; cp < 128; ++cp)
    if (ascii[cp]) chars.push_back(cp);
  return chars + other;
}

// A stored model's vocabulary for `text`: Error naming up to 8 characters the text has and it lacks.
std::u32string fixed_vocabulary(const std::string& vocabulary, const std::u32string& text, const std::string& origin) {
  const TextCorpus v = TextCorpus::from_vocabulary(vocabulary, "the base model's vocabulary");
  const std::u32string own = vocabulary_of(text);
  std::u32string missing;
  for (char32_t cp : own)
    if (find_token(v.chars, cp) < 0) missing.push_back(cp);
  if (missing.empty()) return v.chars;
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 8; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(missing[i]));
    names += (i ? ", " : "") + std::string(buf);
  }
  if (missing.size() > 8) names += ", ...";
  throw Error(origin + ": " + std::to_string(missing.size()) + " of the text's characters are not in the model's "
              "vocabulary of " + std::to_string(v.vocab()) + " characters (" + names + "); a model keeps its "
              "vocabulary (fine-tuning too): remove or replace them in the text");
}
}  // namespace

TextCorpus text_corpus_from_bytes(std::string_view bytes, const std::string& origin, double val_fraction, uint64_t seed,
                                  int64_t chunk, const std::string* vocabulary) {
  if (chunk < 1 || chunk > kTextChunk) throw Error("internal: text chunk of " + std::to_string(chunk) + " characters");
  if (!(val_fraction > 0.0 && val_fraction < 1.0))
    throw Error("data.val_fraction = " + std::to_string(val_fraction) + ": expected a number in (0, 1)");
  if (static_cast<int64_t>(bytes.size()) > kMaxDataFileBytes)
    throw Error(origin + ": more than " + std::to_string(kMaxDataFileBytes) + " bytes (expected a text of at most " +
                std::to_string(kMaxDataFileBytes) + " bytes)");
  const std::u32string text = decode_utf8(bytes, origin);
  const int64_t n = static_cast<int64_t>(text.size());
  if (n < 2 * chunk)
    throw Error(origin + ": the text has " + std::to_string(n) + " characters; at least " + std::to_string(2 * chunk) +
                " are needed for a train/validation split");
  TextCorpus c;
  c.chars = vocabulary ? fixed_vocabulary(*vocabulary, text, origin) : vocabulary_of(text);
  if (c.vocab() < 2 || c.vocab() > kMaxTextVocab)
    throw Error(origin + ": the text has " + std::to_string(c.vocab()) + " distinct characters (expected from 2 to " +
                std::to_string(kMaxTextVocab) + " for a character model's vocabulary)");
  int32_t ascii_token[128];
  for (size_t i = 0; i < c.chars.size() && c.chars[i] < 128; ++i) ascii_token[c.chars[i]] = static_cast<int32_t>(i);
  const auto token = [&](char32_t cp) { return cp < 128 ? ascii_token[cp] : find_token(c.chars, cp); };

  const int64_t chunks = (n + chunk - 1) / chunk;
  int64_t n_val = static_cast<int64_t>(std::llround(val_fraction * static_cast<double>(chunks)));
  n_val = std::clamp<int64_t>(n_val, 1, chunks - 1);
  const std::vector<int64_t> perm = seeded_permutation(chunks, seed * 7919ULL + 17);
  std::vector<bool> is_val(static_cast<size_t>(chunks), false);
  for (int64_t i = 0; i < n_val; ++i) is_val[static_cast<size_t>(perm[static_cast<size_t>(i)])] = true;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    TokenSplit& s = is_val[static_cast<size_t>(ch)] ? c.val : c.train;
    const int64_t b = ch * chunk, e = std::min(n, b + chunk);
    for (int64_t i = b; i < e; ++i) s.tokens.push_back(token(text[static_cast<size_t>(i)]));
    s.chunk_end.push_back(static_cast<int64_t>(s.tokens.size()));
  }
  return c;
}

}  // namespace trainlab
