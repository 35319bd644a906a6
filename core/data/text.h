// Character-level text corpus (tinyshakespeare): the vocabulary is the sorted set of characters
// of the whole text (65 for tinyshakespeare), tokens are their indices.
//
// Split: the text is cut into chunks of kTextChunk characters (the last one shorter); a seeded
// permutation sends round(val_fraction x chunks) of them to validation, the rest to training
// (tinyshakespeare: 69 chunks, 7 validation chunks, 90/10 by characters). Windows never cross a
// chunk boundary, so no window joins two places of the play that are not adjacent.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace trainlab {

constexpr int64_t kTextChunk = 16384;

struct TokenSplit {
  std::vector<int32_t> tokens;   // the split's chunks, concatenated
  std::vector<int64_t> chunk_end;// end offset (exclusive) of each chunk in `tokens`
  // Number of windows of `ctx` inputs (+1 target) that fit inside chunks.
  int64_t window_count(int64_t ctx) const;
  // The start of window number w (0 <= w < window_count(ctx)).
  int64_t window_start(int64_t w, int64_t ctx) const;
  // A uniformly random window start.
  int64_t random_window(std::mt19937_64& rng, int64_t ctx) const;
};

struct TextCorpus {
  std::string chars;  // vocabulary, sorted by byte value
  TokenSplit train, val;
  int64_t vocab() const { return static_cast<int64_t>(chars.size()); }
  // Maps text to tokens; throws Error naming the first character outside the vocabulary.
  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& tokens) const;
};

// Reads a UTF-8/ASCII text file (a regular file of at most kMaxDataFileBytes, data_file.h) byte by
// byte (tinyshakespeare is ASCII). Throws Error naming the path.
TextCorpus load_text_corpus(const std::string& path, double val_fraction, uint64_t seed);

}  // namespace trainlab
