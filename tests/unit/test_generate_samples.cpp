// Several samples side by side (decode/generate.h's generate_samples, `trainlab-cli generate
// --samples B`): at temperature 0 every sample is the one-sequence greedy text (across window
// restarts, with and without the KV cache); at temperature 1 sample b is the one-sequence text of
// its own stream's seed, and the streams differ; the options that do not go together are refused
// with the option named; the command line prints every sample and counts all their tokens.
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "backend/cpu_backend.h"
#include "cli_support.h"
#include "decode/cpu_decoder.h"
#include "decode/decoder.h"
#include "decode/text_generation.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/transformer.h"
#include "util/error.h"

using namespace trainlab;

namespace {
CharGptConfig cfg() {
  CharGptConfig c;
  c.vocab = 17;
  c.chars = "\n abcdefghijklmno";  // 17 characters, ascending
  c.layers = 2, c.heads = 2, c.dim = 16, c.context = 12;
  return c;
}

QString error_of(const GenerateRequest& r) {
  try {
    generate_text(r);
  } catch (const Error& e) {
    return QString(e.what());
  }
  return QString();
}
}  // namespace

class TestGenerateSamples : public QObject {
  Q_OBJECT
 private slots:
  void greedySamplesEqualTheSingleText() {
    CpuBackend be(1);
    CharGpt m(be, cfg(), 61);
    const DecodeWeights w = decode_weights(be, m);
    CharGptGenerator single(w), batch(w, "fp32", 5);
    SampleOptions greedy;
    greedy.temperature = 0.0f;
    const std::vector<int32_t> prompt{3, 1, 4};
    const auto want = generate_tokens(single, prompt, 40, greedy);  // 43 positions: the 12-window restarts
    for (const bool cache : {true, false}) {
      greedy.use_cache = cache;
      const auto got = generate_samples(batch, prompt, 40, greedy);
      QCOMPARE(int(got.size()), 5);
      for (const auto& s : got) QCOMPARE(s, want);
    }
  }

  void eachSampleHasItsOwnStream() {
    QCOMPARE(sample_seed(7, 0), uint64_t(7));  // sample 0 is the one-sequence generation
    std::set<uint64_t> seeds;
    for (uint64_t s : {1, 2})
      for (int64_t b = 0; b < 16; ++b) seeds.insert(sample_seed(s, b));
    QCOMPARE(int(seeds.size()), 32);

    CpuBackend be(1);
    CharGpt m(be, cfg(), 62);
    const DecodeWeights w = decode_weights(be, m);
    CharGptGenerator single(w), batch(w, "fp32", 4);
    SampleOptions opt;
    opt.temperature = 1.0f, opt.seed = 9;
    const std::vector<int32_t> prompt{2, 7};
    const auto got = generate_samples(batch, prompt, 30, opt);
    std::set<std::vector<int32_t>> distinct(got.begin(), got.end());
    QCOMPARE(int(distinct.size()), 4);  // 17 tokens, 30 draws: equal texts would be a shared stream
    double tps = 0;
    opt.use_cache = false;
    QCOMPARE(generate_samples(batch, prompt, 30, opt, &tps), got);
    QVERIFY(tps > 0);
    opt.use_cache = true;
    for (int64_t b = 0; b < 4; ++b) {
      SampleOptions one = opt;
      one.seed = sample_seed(opt.seed, b);
      QCOMPARE(generate_tokens(single, prompt, 30, one), got[static_cast<size_t>(b)]);
    }
  }

  void generateTextWithSamplesAndItsErrors() {
    CpuBackend be(1);
    CharGpt m(be, cfg(), 63);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("model.safetensors").toStdString();
    write_safetensors(path, model_to_file(be, m));
    GenerateRequest r;
    r.weights = path;
    r.prompt = "ab";
    r.tokens = 25;
    r.sample.temperature = 0.9f, r.sample.seed = 4;
    const GenerateResult one = generate_text(r);
    QCOMPARE(int(one.samples.size()), 1);
    r.samples = 3;
    const GenerateResult three = generate_text(r);
    QCOMPARE(int(three.samples.size()), 3);
    QCOMPARE(three.text, three.samples[0]);
    QCOMPARE(three.samples[0], one.text);  // sample 0's stream is --seed's
    QVERIFY(three.samples[1] != three.samples[0] && three.samples[2] != three.samples[1]);
    QVERIFY(three.tokens_per_s > 0);
    QVERIFY(three.decoder.find("3 sequences") != std::string::npos);
    // One read of the weights serves three samples: a third of the bytes a token (plus caches).
    QVERIFY(three.bytes_per_token < one.bytes_per_token);

    r.samples = 0;
    QVERIFY(error_of(r).contains("--samples 0: expected 1..16"));
    r.samples = 17;
    QVERIFY(error_of(r).contains("--samples 17: expected 1..16"));
    r.samples = 2;
    r.draft = path;
    QVERIFY(error_of(r).contains("--samples 2 with --draft"));
  }

  void cliPrintsEverySample() {
    CpuBackend be(1);
    CharGpt m(be, cfg(), 64);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString w = dir.filePath("model.safetensors");
    write_safetensors(w.toStdString(), model_to_file(be, m));
    using trainlab::test::describe;
    using trainlab::test::run_cli;
    const QStringList base{"generate", "--weights", w, "--prompt", "ab", "--tokens", "30"};
    const auto plain = run_cli(base + QStringList{"--temperature", "0"}, 60000);
    QVERIFY2(plain.code == 0, qPrintable(describe(plain)));
    const auto one = run_cli(base + QStringList{"--temperature", "0", "--samples", "1"}, 60000);
    QCOMPARE(one.out, plain.out);  // --samples 1 is the default's output, bit for bit

    const auto js = run_cli(base + QStringList{"--temperature", "0", "--samples", "4", "--json"}, 60000);
    QVERIFY2(js.code == 0, qPrintable(describe(js)));
    const auto j = nlohmann::json::parse(js.out.toStdString());
    QCOMPARE(j.at("samples").get<int>(), 4);
    QCOMPARE(int(j.at("texts").size()), 4);
    for (const auto& t : j.at("texts")) QCOMPARE("ab" + t.get<std::string>() + "\n", plain.out.toStdString());
    QVERIFY(j.at("tokens_per_s").get<double>() > 0);

    const auto text = run_cli(base + QStringList{"--samples", "3", "--seed", "5"}, 60000);
    QVERIFY2(text.code == 0, qPrintable(describe(text)));
    for (const char* label : {"--- sample 1 of 3 (seed 5) ---", "--- sample 2 of 3", "--- sample 3 of 3"})
      QVERIFY2(text.out.contains(label), qPrintable(text.out));
    QVERIFY2(text.err.contains("30 tokens x 3 samples") && text.err.contains("tokens/s over all samples"),
             qPrintable(text.err));

    // Errors name the option and what it takes.
    const auto s0 = run_cli(base + QStringList{"--samples", "0"}, 60000);
    QVERIFY2(s0.code != 0 && s0.err.contains("--samples"), qPrintable(describe(s0)));
    const auto s17 = run_cli(base + QStringList{"--samples", "17"}, 60000);
    QVERIFY2(s17.code != 0 && s17.err.contains("--samples") && s17.err.contains("16"), qPrintable(describe(s17)));
    const auto draft = run_cli(base + QStringList{"--samples", "2", "--draft", w}, 60000);
    QVERIFY2(draft.code != 0 && draft.err.contains("--samples 2 with --draft"), qPrintable(describe(draft)));
    const auto bench = run_cli({"generate", "--bench", "--bench-preset", "tiny", "--samples", "2"}, 60000);
    QVERIFY2(bench.code != 0 && bench.err.contains("--samples is for generation"), qPrintable(describe(bench)));
  }
};

QTEST_APPLESS_MAIN(TestGenerateSamples)
#include "test_generate_samples.moc"
