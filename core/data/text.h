// Character-level text corpus (tinyshakespeare, or any UTF-8 text): the characters are Unicode code
// points (the file is decoded as UTF-8; invalid UTF-8 is refused with its byte offset), the
// vocabulary is the sorted set of the text's distinct characters (65 for tinyshakespeare), and
// tokens are their indices. The vocabulary travels with a model as UTF-8 (CharGptConfig::chars, the
// weights file's metadata), so every entry is a whole character and generation prints whole
// characters.
//
// Split: the text is cut into chunks of kTextChunk characters (the last one shorter); a seeded
// permutation sends round(val_fraction x chunks) of them to validation, the rest to training
// (tinyshakespeare: 69 chunks, 7 validation chunks, 90/10 by characters). Windows never cross a
// chunk boundary, so no window joins two places of the play that are not adjacent.
//
// Bounds: a text file holds at most kMaxDataFileBytes (tokens are int32) and at least two chunks;
// the vocabulary has 2 to kMaxTextVocab characters.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace trainlab {

constexpr int64_t kTextChunk = 16384;
constexpr int64_t kMaxTextVocab = 65536;

struct TokenSplit {
  std::vector<int32_t> tokens;     // the split's chunks, concatenated
  std::vector<int64_t> chunk_end;  // end offset (exclusive) of each chunk in `tokens`
  // Number of windows of `ctx` inputs (+1 target) that fit inside chunks.
  int64_t window_count(int64_t ctx) const;
  // The start of window number w (0 <= w < window_count(ctx)).
  int64_t window_start(int64_t w, int64_t ctx) const;
  // A uniformly random window start.
  int64_t random_window(std::mt19937_64& rng, int64_t ctx) const;
};

struct TextCorpus {
  std::u32string chars;  // vocabulary: distinct code points, ascending (token t is chars[t])
  TokenSplit train, val;
  int64_t vocab() const { return static_cast<int64_t>(chars.size()); }
  // The vocabulary as UTF-8, what CharGptConfig::chars and the weights file store.
  std::string chars_utf8() const;
  // Maps UTF-8 text (e.g. a prompt) to tokens; throws Error naming `origin`, for invalid UTF-8 (its
  // byte offset) or the first character outside the vocabulary.
  std::vector<int32_t> encode(const std::string& text, const std::string& origin = "the text") const;
  // Tokens to UTF-8 text (a token outside the vocabulary becomes U+FFFD).
  std::string decode(const std::vector<int32_t>& tokens) const;
  // The vocabulary of a stored model (UTF-8, ascending, distinct), without splits; throws Error
  // naming `origin` when it is not.
  static TextCorpus from_vocabulary(std::string_view utf8, const std::string& origin);
};

// Reads a UTF-8 text file (a regular file of at most kMaxDataFileBytes). Throws Error naming the path.
// `vocabulary` (UTF-8, ascending and distinct: a trained model's, for fine-tuning it on this text):
// the tokens are that vocabulary's, and a character of the text outside it is an Error naming the
// first few such characters (fine-tuning keeps the base model's vocabulary; filter the text to it).
TextCorpus load_text_corpus(const std::string& path, double val_fraction, uint64_t seed,
                            const std::string* vocabulary = nullptr);
// The same from the file's bytes (`origin` names them in errors); `chunk` is kTextChunk but for tests.
TextCorpus text_corpus_from_bytes(std::string_view bytes, const std::string& origin, double val_fraction, uint64_t seed,
                                  int64_t chunk = kTextChunk, const std::string* vocabulary = nullptr);

}  // namespace trainlab
