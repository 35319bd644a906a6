// Generation with the KV cache: greedy tokens equal those of rerunning the whole window for every
// token (also across window restarts), the per-row engine's logits match CharGpt::forward, and
// seeded sampling is reproducible. The library functions behind `trainlab-cli generate`
// (generate_text) and the decode benchmark (bench_decode) give, from a weights file, what the CPU
// decoder gives on the model itself.
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "backend/cpu_backend.h"
#include "backend/calibration.h"
#include "compress/quant.h"
#include "data/text.h"
#include "decode/cpu_decoder.h"
#include "decode/decode_bench.h"
#include "decode/decoder.h"
#include "decode/text_generation.h"
#include "io/safetensors.h"
#include "nn/transformer.h"

using namespace trainlab;

namespace {
CharGptConfig cfg() {
  CharGptConfig c;
  c.vocab = 17;
  c.layers = 2, c.heads = 2, c.dim = 16, c.context = 12;
  return c;
}
}  // namespace

class TestGenerate : public QObject {
  Q_OBJECT
 private slots:
  void kvCacheEqualsRecomputation() {
    CpuBackend be(1);
    CharGpt m(be, cfg(), 21);
    CharGptGenerator gen(be, m);
    SampleOptions greedy;
    greedy.temperature = 0.0f;
    const std::vector<int32_t> prompt{3, 1, 4, 1, 5};
    const auto with = gen.generate(prompt, 40, greedy);  // 45 positions: the 12-window restarts
    greedy.use_cache = false;
    const auto without = gen.generate(prompt, 40, greedy);
    QCOMPARE(with, without);
    QCOMPARE(int(with.size()), 40);
    SampleOptions s;
    s.temperature = 0.8f, s.top_k = 5, s.seed = 3;
    const auto a = gen.generate(prompt, 30, s);
    s.use_cache = false;
    QCOMPARE(gen.generate(prompt, 30, s), a);
  }

  void engineMatchesModelForward() {
    CpuBackend be(1);
    CharGpt m(be, cfg(), 22);
    CharGptGenerator gen(be, m);
    const std::vector<int32_t> toks{0, 5, 9, 16, 2, 2, 7, 11, 3, 1, 8, 4};
    const auto rows = gen.logits_sequence(toks);
    Tensor x = be.empty({1, 12}, DType::I32, MemCategory::Activations);
    be.upload(x, toks.data(), DType::I32);
    Tensor logits = m.forward(be, x, false);
    std::vector<float> l(static_cast<size_t>(logits.numel()));
    be.download(logits, l.data(), DType::F32);
    for (int64_t t = 0; t < 12; ++t)
      for (int64_t v = 0; v < 17; ++v)
        QVERIFY2(std::fabs(rows[t][v] - l[t * 17 + v]) < 1e-4f * (1 + std::fabs(l[t * 17 + v])), "engine vs forward");
  }

  void generateTextFromAWeightsFile() {
    CpuBackend be(1);
    CharGptConfig c = cfg();
    c.chars = "\n abcdefghijklmno";  // 17 characters, ascending
    c.dim = 64;                      // rows of whole int4 groups of 32 and 64
    CharGpt m(be, c, 23);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("model.safetensors").toStdString();
    write_safetensors(path, model_to_file(be, m));
    const TextCorpus vocab = TextCorpus::from_vocabulary(c.chars, "test");

    GenerateRequest r;
    r.weights = path;
    r.prompt = "ab";
    r.tokens = 40;  // 42 positions: the 12-window restarts
    r.sample.temperature = 0.7f, r.sample.top_k = 4, r.sample.seed = 5;
    const GenerateResult g = generate_text(r);
    CharGptGenerator gen(be, m);
    QCOMPARE(g.text, vocab.decode(gen.generate(vocab.encode("ab"), 40, r.sample)));
    QCOMPARE(g.format, std::string("fp32"));
    QVERIFY(!g.on_gpu && g.notice.empty());
    QCOMPARE(g.weight_bytes_per_token, gen.weight_bytes_per_token());
    QVERIFY(g.bytes_per_token > g.weight_bytes_per_token);
    // The ceiling is the CPU's measured copy bandwidth over the bytes a token (no datasheet number).
    QVERIFY(g.copy_bytes_per_s > 1e8);  // a measurement (the 4.8 TB/s datasheet figure is gone)
    QVERIFY(g.copy_bytes_per_s < 4e12);
    {  // a cached calibration of the device gives the bandwidth without measuring again
      QTemporaryDir cache;
      qputenv("XDG_CACHE_HOME", cache.path().toUtf8());
      const auto cpu = create_backend("cpu");
      Calibration cal;
      cal.device = cpu->info().name, cal.software = cpu->info().software;
      cal.lab_version = lab_version(), cal.build = lab_build();
      cal.peaks = calibration_plan(cpu->info());
      for (CalibratedPeak& p : cal.peaks) p.tflops = 1.0, p.size = 32;
      cal.bandwidth_bytes_per_s = 7e9, cal.seconds = 0.5;
      std::filesystem::create_directories(cache.path().toStdString() + "/trainlab");
      std::ofstream(calibration_file(cache.path().toStdString() + "/trainlab", cpu->info())) << calibration_to_json(cal);
      const GenerateResult cached = generate_text(r);
      qunsetenv("XDG_CACHE_HOME");
      QCOMPARE(cached.copy_bytes_per_s, 7e9);
      QCOMPARE(cached.ceiling_tokens_per_s, 7e9 / static_cast<double>(cached.bytes_per_token));
    }
    QCOMPARE(g.ceiling_tokens_per_s, g.copy_bytes_per_s / static_cast<double>(g.bytes_per_token));
    // A requested format: the CPU decoder on the values int4 represents.
    r.format = DecodeSpec::parse("int4", 32);
    r.sample.temperature = 0.0f;
    CharGptGenerator ref(decode_weights(be, m).as_format(*r.format));
    QCOMPARE(generate_text(r).text, vocab.decode(ref.generate(vocab.encode("ab"), 40, r.sample)));
    r.weights = dir.filePath("missing.safetensors").toStdString();
    QVERIFY_THROWS_EXCEPTION(Error, generate_text(r));

    // The decode benchmark on the CPU: the measured copy bandwidth, then one fp32 record (or the
    // format asked for) of n tokens whose ceiling is that bandwidth over the bytes a token reads.
    const auto rows = bench_decode("cpu", path, "", "", 5, 1);
    QCOMPARE(int(rows.size()), 2);
    QCOMPARE(rows[0].at("case").get<std::string>(), std::string("bandwidth"));
    const double bw = rows[0].at("copy_bytes_per_s").get<double>();
    QVERIFY2(bw > 1e8 && bw < 1e13, std::to_string(bw).c_str());
    QVERIFY(!rows[1].contains("error"));
    QCOMPARE(rows[1].at("format").get<std::string>(), std::string("fp32"));
    QCOMPARE(rows[1].at("tokens").get<int64_t>(), int64_t(5));
    QCOMPARE(rows[1].at("weight_bytes_per_token").get<int64_t>(), gen.weight_bytes_per_token());
    QCOMPARE(rows[1].at("copy_bytes_per_s").get<double>(), bw);
    QCOMPARE(rows[1].at("ceiling_tokens_per_s").get<double>(), bw / rows[1].at("bytes_per_token").get<double>());
    // The CPU reference runs no kernels: no graph, no programmatic dependent launch, no step kernel.
    for (const char* k : {"cuda_graph", "pdl", "one_kernel"}) QVERIFY2(!rows[1].at(k).get<bool>(), k);
    const auto i4 = bench_decode("cpu", path, "", "int4-g64", 50, 1);  // capped at context - 1
    QCOMPARE(i4.at(1).at("tokens").get<int64_t>(), int64_t(11));
    QVERIFY(i4.at(1).at("decoder").get<std::string>().find("int4-g64") != std::string::npos);
    QVERIFY_THROWS_EXCEPTION(Error, bench_decode("cpu", path, "", "int4-g48", 5, 1));
    // Batches: a row each, tokens/s over every sequence's tokens, the ceiling batch times a step's.
    const auto batched = bench_decode("cpu", path, "", "fp32", 4, 1, {}, {1, 4});
    QCOMPARE(int(batched.size()), 3);
    QCOMPARE(batched[1].at("batch").get<int64_t>(), int64_t(1));
    QCOMPARE(batched[2].at("batch").get<int64_t>(), int64_t(4));
    QVERIFY(!batched[2].contains("error"));
    QCOMPARE(batched[2].at("kv_bytes_per_token").get<int64_t>(), 4 * batched[1].at("kv_bytes_per_token").get<int64_t>());
    QCOMPARE(batched[2].at("ceiling_tokens_per_s").get<double>(),
             4 * batched[0].at("copy_bytes_per_s").get<double>() / batched[2].at("bytes_per_token").get<double>());
    QVERIFY_THROWS_EXCEPTION(Error, bench_decode("cpu", path, "", "fp32", 4, 1, {}, {17}));
  }
};

QTEST_APPLESS_MAIN(TestGenerate)
#include "test_generate.moc"
