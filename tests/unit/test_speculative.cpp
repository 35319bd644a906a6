// ctest-labels: unit;no-asan
// Speculative decoding (decode/speculative.h) on the CPU decoder: a batched pass is bit-identical
// to one push a row and rolls back; at temperature 0 the text is the target's own greedy text
// (several prompts, k 1..6, across window restarts, with a draft of other weights and an int4
// copy of the target); at temperature 1 the joint distribution of three generated tokens is the
// target's (chi-square goodness of fit against the exact probabilities, fixed seeds), a threshold
// that the wrong rule "always accept the draft's tokens" fails by far; draft checks name what
// differs; and `trainlab-cli generate --draft --speculate` prints the measurements.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <map>
#include <random>

#include "backend/cpu_backend.h"
#include "cli_support.h"
#include "decode/cpu_decoder.h"
#include "decode/decoder.h"
#include "decode/speculative.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/transformer.h"
#include "util/error.h"

using namespace trainlab;

namespace {

// A one-layer char-gpt (dim 8, 2 heads) with its initial weights scaled by `gain` (LayerNorm
// gains left at 1): the next-token distributions are far from uniform, so that a wrong acceptance
// rule shows.
DecodeWeights random_weights(int64_t vocab, int64_t context, uint64_t seed, float gain = 4.0f) {
  CpuBackend be(1);
  CharGptConfig c;
  c.vocab = vocab;
  c.layers = 1, c.heads = 2, c.dim = 8, c.context = context;
  CharGpt m(be, c, seed);
  DecodeWeights w = decode_weights(be, m);
  for (auto& [name, v] : w.tensors)
    if (name.find("ln") == std::string::npos)
      for (float& x : v) x *= gain;
  return w;
}

CharGptConfig gpt_cfg() {
  CharGptConfig c;
  c.vocab = 17;
  c.layers = 2, c.heads = 2, c.dim = 32, c.context = 12;
  return c;
}

// The chi-square statistic of `counts` against probabilities `p` (n samples), cells of expected
// count below 5 merged into one; `df` receives the degrees of freedom.
double chi_square(const std::map<int, int64_t>& counts, const std::map<int, double>& p, int64_t n, int* df) {
  double stat = 0.0, small_e = 0.0, small_o = 0.0;
  int cells = 0;
  for (const auto& [cell, prob] : p) {
    const double e = prob * static_cast<double>(n);
    const auto it = counts.find(cell);
    const double o = it == counts.end() ? 0.0 : static_cast<double>(it->second);
    if (e < 5.0) {
      small_e += e, small_o += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    ++cells;
  }
  if (small_e > 0.0) {
    stat += (small_o - small_e) * (small_o - small_e) / small_e;
    ++cells;
  }
  *df = cells - 1;
  return stat;
}

// The chi-square quantile of `df` degrees of freedom at upper tail 0.001 (Wilson-Hilferty; z = 3.09).
double chi_square_critical(int df) {
  const double k = df, a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + 3.0902 * std::sqrt(a), 3.0);
}

}  // namespace

class TestSpeculative : public QObject {
  Q_OBJECT
 private slots:
  void batchedRowsEqualPushesAndRollBack() {
    CpuBackend be(1);
    CharGpt m(be, gpt_cfg(), 31);
    CharGptGenerator a(be, m), b(be, m);
    const std::vector<int32_t> toks{3, 1, 4, 1, 5, 9, 2};
    a.push(toks[0]);
    b.push(toks[0]);
    const std::vector<float> rows = a.push_rows({toks.begin() + 1, toks.end()});
    const size_t V = static_cast<size_t>(a.shape().padded_vocab);
    QCOMPARE(rows.size(), (toks.size() - 1) * V);
    for (size_t i = 1; i < toks.size(); ++i) {
      b.push(toks[i]);
      for (size_t j = 0; j < V; ++j) QCOMPARE(rows[(i - 1) * V + j], b.logits()[j]);  // bit for bit
    }
    // Rolled back to 3 positions, the next push sees only those: the logits of the fourth token.
    a.truncate(3);
    QCOMPARE(a.length(), int64_t(3));
    a.push(toks[3]);
    for (size_t j = 0; j < V; ++j) QCOMPARE(a.logits()[j], rows[2 * V + j]);
    QVERIFY_THROWS_EXCEPTION(Error, a.truncate(5));
    QVERIFY_THROWS_EXCEPTION(Error, a.truncate(-1));
  }

  void greedyTextIsTheTargets() {
    CpuBackend be(1);
    CharGpt target_model(be, gpt_cfg(), 41), other(be, gpt_cfg(), 42);
    const DecodeWeights tw = decode_weights(be, target_model);
    CharGptGenerator target(tw);
    CharGptGenerator int4_draft(tw.as_format(DecodeSpec::parse("int4", 32)), "int4-g32");
    CharGptGenerator other_draft(be, other);
    SampleOptions greedy;
    greedy.temperature = 0.0f;
    const std::vector<std::vector<int32_t>> prompts = {{3}, {3, 1, 4, 1, 5}, {16, 0, 7, 7, 2, 9, 11, 13, 1, 2, 3}};
    double accepted_int4 = 0, accepted_other = 0;
    for (const auto& prompt : prompts) {
      const std::vector<int32_t> want = generate_tokens(target, prompt, 45, greedy);  // the 12-window restarts
      for (int k = 1; k <= 6; ++k) {
        for (CharGptGenerator* draft : {&int4_draft, &other_draft}) {
          SpeculativeStats st;
          const auto got = speculative_generate(target, *draft, prompt, 45, k, greedy, &st);
          QVERIFY2(got == want, qPrintable(QString("prompt of %1, k %2").arg(prompt.size()).arg(k)));
          QCOMPARE(st.tokens, int64_t(45));
          QCOMPARE(st.tokens, st.accepted + st.target_passes);  // a pass: its accepted tokens and one more
          QVERIFY(st.proposed >= st.accepted);
          (draft == &int4_draft ? accepted_int4 : accepted_other) += st.acceptance_rate();
        }
      }
    }
    // The int4 copy of the target agrees with it far more often than a model of other weights.
    QVERIFY2(accepted_int4 > accepted_other, qPrintable(QString("%1 vs %2").arg(accepted_int4).arg(accepted_other)));
  }

  // Three tokens after a prompt, 20000 seeds, k = 1 (three rounds: rollback and draft catch-up)
  // and k = 4 (one round of two proposals and the bonus token): chi-square of the joint counts
  // against the target's exact probabilities below the 0.1% quantile; tokens drawn as the
  // always-accepting rule would give them (the draft's own two tokens, then the target's third)
  // far above it.
  void sampledDistributionIsTheTargets() {
    CharGptGenerator target(random_weights(5, 16, 1)), draft(random_weights(5, 16, 2));
    const std::vector<int32_t> prompt{1, 3};
    SampleOptions opt;
    opt.temperature = 1.0f;
    // Exact probabilities of (x1, x2, x3).
    std::map<int, double> p;
    auto dist = [&](const std::vector<int32_t>& toks) {
      const auto rows = target.logits_sequence(toks);
      double sum = 0.0;
      std::vector<double> w = token_weights(rows.back().data(), 5, opt, &sum);
      for (double& v : w) v /= sum;
      return w;
    };
    const std::vector<double> p1 = dist(prompt);
    for (int a = 0; a < 5; ++a) {
      const std::vector<double> p2 = dist({1, 3, a});
      for (int b = 0; b < 5; ++b) {
        const std::vector<double> p3 = dist({1, 3, a, b});
        for (int c = 0; c < 5; ++c) p[a * 25 + b * 5 + c] = p1[a] * p2[b] * p3[c];
      }
    }
    const int64_t n = 20000;
    for (int k : {1, 4}) {
      std::map<int, int64_t> counts;
      SpeculativeStats total;
      for (int64_t s = 0; s < n; ++s) {
        opt.seed = static_cast<uint64_t>(1000 + s);
        SpeculativeStats st;
        const auto t = speculative_generate(target, draft, prompt, 3, k, opt, &st);
        ++counts[t[0] * 25 + t[1] * 5 + t[2]];
        total.proposed += st.proposed, total.accepted += st.accepted;
      }
      int df = 0;
      const double chi = chi_square(counts, p, n, &df);
      qInfo("k %d: chi-square %.1f, %d degrees of freedom, 0.1%% quantile %.1f, acceptance %.2f", k, chi, df,
            chi_square_critical(df), total.acceptance_rate());
      QVERIFY2(chi < chi_square_critical(df), qPrintable(QString("k %1: chi-square %2").arg(k).arg(chi)));
      QVERIFY(total.accepted > 0 && total.accepted < total.proposed);  // both branches of the rule ran
    }
    // The wrong rule: accept every proposal. Its tokens are the draft's samples (then the target's).
    std::map<int, int64_t> wrong;
    for (int64_t s = 0; s < n; ++s) {
      opt.seed = static_cast<uint64_t>(1000 + s);
      const auto d = generate_tokens(draft, prompt, 2, opt);
      const std::vector<double> p3 = dist({1, 3, d[0], d[1]});
      std::mt19937_64 rng(opt.seed);
      const int32_t c = draw_token(p3, 1.0, rng);
      ++wrong[d[0] * 25 + d[1] * 5 + c];
    }
    int df = 0;
    const double chi = chi_square(wrong, p, n, &df);
    qInfo("always accepting: chi-square %.1f, 0.1%% quantile %.1f", chi, chi_square_critical(df));
    QVERIFY2(chi > 10 * chi_square_critical(df), qPrintable(QString("always accepting: chi-square %1").arg(chi)));
  }

  void draftChecksNameTheMismatch() {
    CharGptGenerator target(random_weights(5, 16, 1));
    CharGptGenerator other_vocab(random_weights(6, 16, 2));
    CharGptGenerator short_ctx(random_weights(5, 8, 3));
    CharGptGenerator long_ctx(random_weights(5, 32, 4));
    SampleOptions opt;
    auto message = [&](TokenDecoder& d, int k, const SampleOptions& o) {
      try {
        speculative_generate(target, d, {1}, 5, k, o);
      } catch (const Error& e) {
        return QString(e.what());
      }
      return QString();
    };
    QVERIFY(message(other_vocab, 2, opt).contains("vocabulary (6 tokens) is not the target's (5 tokens)"));
    QVERIFY(message(short_ctx, 2, opt).contains("context (8 positions) is shorter than the target's (16)"));
    QVERIFY(message(long_ctx, 2, opt).isEmpty());  // a longer context holds the target's window
    QVERIFY(message(long_ctx, 0, opt).contains("--speculate must be 1..16"));
    QVERIFY(message(long_ctx, 17, opt).contains("--speculate must be 1..16"));
    opt.use_cache = false;
    QVERIFY(message(long_ctx, 2, opt).contains("needs the KV cache"));
  }

  void cliGenerateWithADraft() {
    CpuBackend be(1);
    CharGptConfig c = gpt_cfg();
    c.chars = "\n abcdefghijklmno";
    CharGpt m(be, c, 51);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString target = dir.filePath("target.safetensors"), draft = dir.filePath("draft.safetensors");
    write_safetensors(target.toStdString(), model_to_file(be, m));
    CharGptConfig small = c;
    small.layers = 1, small.dim = 16;
    CharGpt d(be, small, 52);
    write_safetensors(draft.toStdString(), model_to_file(be, d));
    using trainlab::test::run_cli;
    const auto plain = run_cli({"generate", "--weights", target, "--prompt", "ab", "--tokens", "30", "--temperature", "0"}, 60000);
    QVERIFY2(plain.code == 0, qPrintable(trainlab::test::describe(plain)));
    const auto spec = run_cli({"generate", "--weights", target, "--prompt", "ab", "--tokens", "30", "--temperature", "0",
                               "--draft", draft, "--speculate", "3"},
                              60000);
    QVERIFY2(spec.code == 0, qPrintable(trainlab::test::describe(spec)));
    QCOMPARE(spec.out, plain.out);  // greedy: the target's own text
    QVERIFY2(spec.err.contains("speculative decoding, k = 3") && spec.err.contains("tokens a target pass"),
             qPrintable(spec.err));
    const auto js = run_cli({"generate", "--weights", target, "--tokens", "20", "--draft", draft, "--json"}, 60000);
    QVERIFY2(js.code == 0, qPrintable(trainlab::test::describe(js)));
    const auto j = nlohmann::json::parse(js.out.toStdString());
    QVERIFY(j.at("speculative").at("acceptance_rate").get<double>() >= 0.0);
    QVERIFY(j.at("speculative").at("speedup").get<double>() > 0.0);
    // Errors: a range, a draft of another vocabulary, --speculate without --draft.
    const auto k0 = run_cli({"generate", "--weights", target, "--draft", draft, "--speculate", "0"}, 60000);
    QVERIFY(k0.code != 0 && k0.err.contains("--speculate"));
    CharGptConfig other = small;
    other.vocab = 16;
    other.chars = "\n abcdefghijklmn";
    CharGpt o(be, other, 53);
    const QString odraft = dir.filePath("other.safetensors");
    write_safetensors(odraft.toStdString(), model_to_file(be, o));
    const auto ov = run_cli({"generate", "--weights", target, "--draft", odraft}, 60000);
    QVERIFY2(ov.code != 0 && ov.err.contains("vocabulary (16 characters) is not the target's (17 characters)"),
             qPrintable(ov.err));
    const auto nod = run_cli({"generate", "--weights", target, "--speculate", "2"}, 60000);
    QVERIFY(nod.code != 0 && nod.err.contains("--speculate needs --draft"));
  }
};

QTEST_APPLESS_MAIN(TestSpeculative)
#include "test_speculative.moc"
