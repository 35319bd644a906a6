#include "decode/speculative.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "util/error.h"

namespace trainlab {

namespace {

// The normalised distribution sample_token draws from at these logits (T > 0).
std::vector<double> distribution(const float* logits, int64_t V, const SampleOptions& opt) {
  double sum = 0.0;
  std::vector<double> w = token_weights(logits, V, opt, &sum);
  for (double& v : w) v /= sum;
  return w;
}

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0); }

// Brings the draft to hold exactly `win` (dwin: what it holds): it keeps the longest common prefix
// (the same tokens at the same positions give the same cache rows) and runs the rest in one pass.
void sync_draft(TokenDecoder& draft, std::vector<int32_t>& dwin, const std::vector<int32_t>& win, SpeculativeStats& st) {
  size_t c = 0;
  while (c < dwin.size() && c < win.size() && dwin[c] == win[c]) ++c;
  draft.truncate(static_cast<int64_t>(c));
  dwin.assign(win.begin(), win.begin() + static_cast<std::ptrdiff_t>(c));
  const std::vector<int32_t> rest(win.begin() + static_cast<std::ptrdiff_t>(c), win.end());
  if (rest.empty()) return;
  draft.push_rows(rest);
  dwin.insert(dwin.end(), rest.begin(), rest.end());
  st.draft_pushes += static_cast<int64_t>(rest.size());
}

// The draft's k proposals after `pending`, and (T > 0) the distribution each was drawn from.
std::vector<int32_t> propose(TokenDecoder& draft, std::vector<int32_t>& dwin, int32_t pending, int64_t k,
                             const SampleOptions& opt, std::mt19937_64& rng, std::vector<std::vector<double>>& qs,
                             SpeculativeStats& st) {
  const int64_t V = draft.shape().vocab;
  std::vector<int32_t> xs;
  qs.clear();
  int32_t last = pending;
  for (int64_t i = 0; i < k; ++i) {
    draft.push(last);
    dwin.push_back(last);
    ++st.draft_pushes;
    const float* logits = draft.logits().data();
    if (opt.temperature <= 0.0f) {
      last = greedy_token(logits, V);
    } else {
      qs.push_back(distribution(logits, V, opt));
      last = draw_token(qs.back(), 1.0, rng);
    }
    xs.push_back(last);
  }
  return xs;
}

// The rejection rule over the target's rows (row i: p after pending x1..x_i); returns the number
// of proposals accepted and sets `next` (the correction, or the bonus token when all are accepted).
int64_t verify(const std::vector<float>& rows, int64_t PV, int64_t V, const std::vector<int32_t>& xs,
               const std::vector<std::vector<double>>& qs, const SampleOptions& opt, std::mt19937_64& rng, int32_t& next) {
  const bool greedy = opt.temperature <= 0.0f;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float* logits = rows.data() + static_cast<int64_t>(i) * PV;
    const int32_t x = xs[i];
    if (greedy) {
      next = greedy_token(logits, V);
      if (next == x) continue;
      return static_cast<int64_t>(i);
    }
    const std::vector<double> p = distribution(logits, V, opt);
    const std::vector<double>& q = qs[i];
    if (uniform01(rng) * q[static_cast<size_t>(x)] < p[static_cast<size_t>(x)]) continue;  // r < p(x) / q(x)
    std::vector<double> residual(p.size());
    double sum = 0.0;
    for (size_t j = 0; j < p.size(); ++j) sum += (residual[j] = std::max(0.0, p[j] - q[j]));
    // sum is 0 only when p == q, where rejection cannot happen (r < 1); guard rounding all the same.
    next = sum > 0.0 ? draw_token(residual, sum, rng) : draw_token(p, 1.0, rng);
    return static_cast<int64_t>(i);
  }
  next = sample_token(rows.data() + static_cast<int64_t>(xs.size()) * PV, V, opt, rng);
  return static_cast<int64_t>(xs.size());
}

}  // namespace

void check_draft(const DecoderShape& target, const DecoderShape& draft) {
  if (draft.vocab != target.vocab)
    throw Error("the draft's vocabulary (" + std::to_string(draft.vocab) + " tokens) is not the target's (" +
                std::to_string(target.vocab) + " tokens): train the draft on the same text");
  if (draft.context < target.context)
    throw Error("the draft's context (" + std::to_string(draft.context) + " positions) is shorter than the target's (" +
                std::to_string(target.context) + "): the draft must hold the target's window");
}

std::vector<int32_t> speculative_generate(TokenDecoder& target, TokenDecoder& draft, const std::vector<int32_t>& prompt,
                                          int64_t n, int k, const SampleOptions& opt, SpeculativeStats* stats) {
  if (prompt.empty()) throw Error("generation needs a prompt of at least one character");
  if (k < 1 || k > kMaxSpeculate)
    throw Error("--speculate must be 1.." + std::to_string(kMaxSpeculate) + ", got " + std::to_string(k));
  if (!opt.use_cache) throw Error("speculative decoding needs the KV cache (it rolls the cache back): drop --no-kv-cache");
  check_draft(target.shape(), draft.shape());
  SpeculativeStats st;
  const int64_t ctx = target.shape().context, V = target.shape().vocab, PV = target.shape().padded_vocab;
  std::vector<int32_t> win, dwin;  // the target's window (committed tokens pushed), the draft's
  target.reset();
  draft.reset();
  for (size_t i = 0; i + 1 < prompt.size(); ++i) window_append(win, prompt[i], ctx, target, true);
  int32_t pending = prompt.back();  // committed, not yet pushed to the target
  std::mt19937_64 rng(opt.seed);
  std::vector<std::vector<double>> qs;
  std::vector<int32_t> out;
  const auto t0 = std::chrono::steady_clock::now();
  while (static_cast<int64_t>(out.size()) < n) {
    if (opt.stop && opt.stop->load(std::memory_order_relaxed)) break;
    auto tick = std::chrono::steady_clock::now();
    const auto lap = [&tick](double& into) {
      const auto now = std::chrono::steady_clock::now();
      into += std::chrono::duration<double>(now - tick).count();
      tick = now;
    };
    if (static_cast<int64_t>(win.size()) == ctx) {  // full: restart from its last ctx/2 tokens
      win = window_after(win, ctx);
      target.reset();
      target.push_rows(win);
      lap(st.target_seconds);
    }
    const int64_t room = ctx - static_cast<int64_t>(win.size()) - 1;
    const int64_t kk = std::min<int64_t>({k, room, n - static_cast<int64_t>(out.size()) - 1});
    std::vector<int32_t> xs;
    if (kk > 0) {
      sync_draft(draft, dwin, win, st);
      xs = propose(draft, dwin, pending, kk, opt, rng, qs, st);
      lap(st.draft_seconds);
    }
    std::vector<int32_t> rows = {pending};
    rows.insert(rows.end(), xs.begin(), xs.end());
    const std::vector<float> logits = target.push_rows(rows);
    lap(st.target_seconds);
    int32_t next = 0;
    const int64_t a = verify(logits, PV, V, xs, qs, opt, rng, next);
    ++st.target_passes;
    st.proposed += kk;
    st.accepted += a;
    win.insert(win.end(), rows.begin(), rows.begin() + 1 + a);
    target.truncate(static_cast<int64_t>(win.size()));
    out.insert(out.end(), xs.begin(), xs.begin() + a);
    out.push_back(next);
    pending = next;
  }
  st.tokens = static_cast<int64_t>(out.size());
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats) *stats = st;
  return out;
}

}  // namespace trainlab
