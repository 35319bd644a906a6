// Speculative decoding (Leviathan, Kalman and Matias 2023; Chen et al. 2023): a cheap draft
// decoder proposes k tokens one at a time, the target decoder scores all of them in one batched
// pass (TokenDecoder::push_rows: k + 1 rows, each weight read once), and a rejection rule keeps
// a prefix of the proposals so that the tokens come from the target's distribution exactly.
//
// One round, with the window holding the committed tokens and t0 the last committed token (not
// yet pushed to the target):
//   draft:   push t0, x1 ~ q1; push x1, x2 ~ q2; ...; x_k ~ q_k        (q_i: the draft's
//            distribution after t0 x1..x_{i-1}, the same temperature and top-k as the target's)
//   target:  push_rows(t0, x1, ..., x_k) -> p_1 .. p_{k+1}             (p_i likewise)
//   for i = 1..k: with r ~ U[0, 1): accept x_i when r < p_i(x_i) / q_i(x_i) (probability
//            min(1, p/q)); else emit y ~ norm(max(0, p_i - q_i)) and end the round;
//   when all k are accepted: emit the bonus token y ~ p_{k+1}.
// Then the target is truncated to the accepted prefix (t0 x1..x_a) and y is the next t0; the
// draft is rolled back to the longest prefix of its window that is still the target's.
// P(emit x) = q(x) min(1, p(x)/q(x)) + (1 - sum_z min(q(z), p(z))) norm(max(0, p - q))(x) = p(x).
//
// Temperature 0 is the limit of one-hot p and q: accept x_i when it is the target's arg max,
// else emit the target's arg max, so the text is the target's own greedy text. The batched rows
// are bit-identical to one push each (token_decoder.h), and a round never crosses a window
// restart (decode/generate.h's rule: proposals are cut to the room left), so the target sees
// exactly the windows that generate_tokens gives it.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/token_decoder.h"
#include "decode/generate.h"

namespace trainlab {

struct SpeculativeStats {
  int64_t target_passes = 0;  // batched verification passes of the target (one per round)
  int64_t proposed = 0;       // draft tokens proposed
  int64_t accepted = 0;       // of those, accepted
  int64_t tokens = 0;         // tokens emitted
  int64_t draft_pushes = 0;   // tokens the draft ran (proposals and catching up with the window)
  double seconds = 0.0;       // wall time of the generation (prefill excluded)
  double draft_seconds = 0.0;   // of it: the draft's pushes (proposals, catching up)
  double target_seconds = 0.0;  // the target's verification passes (and window restarts)
  double acceptance_rate() const { return proposed ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0; }
  double tokens_per_pass() const {
    return target_passes ? static_cast<double>(tokens) / static_cast<double>(target_passes) : 0.0;
  }
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0; }
};

// Speculative decoding's k: proposals a round, 1..kMaxSpeculate.
constexpr int kMaxSpeculate = 16;

// Throws Error when `draft` cannot draft for `target`: a different vocabulary size, or a context
// shorter than the target's (the draft must hold the target's window).
void check_draft(const DecoderShape& target, const DecoderShape& draft);

// Continues `prompt` by n tokens from the target's distribution (opt: temperature, top-k, seed,
// stop), the draft proposing k tokens a round. opt.use_cache must be set (a rollback needs the
// cache). The sampling draws differ from generate_tokens' at T > 0 (the same distribution, other
// draws); at T = 0 the tokens are generate_tokens'(target).
std::vector<int32_t> speculative_generate(TokenDecoder& target, TokenDecoder& draft, const std::vector<int32_t>& prompt,
                                          int64_t n, int k, const SampleOptions& opt, SpeculativeStats* stats = nullptr);

}  // namespace trainlab
