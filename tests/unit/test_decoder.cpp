// The device-independent decoding layer (backend/token_decoder.h, decode/): weight-format names and
// containers, the values a format represents (bf16 rounding; int8/int4 equal to
// tensor/quant_format.h's fake quantization with groups inside rows), the model-agnostic
// DecodeWeights (names, shapes, validation), the CPU decoder that make_decoder gives, and
// generate_tokens (the one generation loop) against CharGptGenerator::generate.
#include <QtTest>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "backend/cpu_backend.h"
#include "decode/cpu_decoder.h"
#include "decode/decoder.h"
#include "decode/generate.h"
#include "nn/transformer.h"
#include "util/error.h"

namespace {
using trainlab::CharGpt, trainlab::CharGptConfig, trainlab::DecodeWeights, trainlab::CpuBackend;

// A random-initialised char-gpt (2 layers, d 64, a 12-position window so that 30 generated tokens
// restart it) and its weights as the decoders take them.
struct RandomGpt {
  CpuBackend be{1};
  std::unique_ptr<CharGpt> net;
  DecodeWeights w;
  explicit RandomGpt(uint64_t seed) {
    CharGptConfig c;
    c.vocab = 17;
    c.layers = 2, c.heads = 2, c.dim = 64, c.context = 12;
    net = std::make_unique<CharGpt>(be, c, seed);
    w = trainlab::decode_weights(be, *net);
  }
};
}  // namespace

using namespace trainlab;

class TestDecoder : public QObject {
  Q_OBJECT
 private slots:
  void specNamesAndContainers() {
    QCOMPARE(QString::fromStdString(DecodeSpec::parse("bf16", 32).label()), QString("bf16"));
    QCOMPARE(QString::fromStdString(DecodeSpec::parse("int8", 32).label()), QString("int8-channel"));
    QCOMPARE(QString::fromStdString(DecodeSpec::parse("int4", 64).label()), QString("int4-g64"));
    QVERIFY_THROWS_EXCEPTION(Error, DecodeSpec::parse("int4", 48));
    QVERIFY_THROWS_EXCEPTION(Error, DecodeSpec::parse("int5", 32));
    // Codes of 2..4 bits go in the 4-bit container, 5..8 in int8.
    QVERIFY(DecodeSpec::from_quant(QuantSpec{3, QuantGranularity::Group, 32}).format == DecodeFormat::I4);
    QVERIFY(DecodeSpec::from_quant(QuantSpec{4, QuantGranularity::Channel, 32}).format == DecodeFormat::I4);
    QVERIFY(DecodeSpec::from_quant(QuantSpec{5, QuantGranularity::Tensor, 32}).format == DecodeFormat::I8);
    QCOMPARE(QString::fromStdString(DecodeSpec::from_quant(QuantSpec{3, QuantGranularity::Group, 32}).label()),
             QString("int4(3-bit codes)-g32"));
  }

  void formatValues() {
    const RandomGpt model(3);
    const DecodeWeights& w = model.w;
    QCOMPARE(int(DecodeWeights::matrix_names(w.shape).size()), 2 * 4 + 1);
    const std::string name = "blocks.1.fc.weight";
    const auto [rows, cols] = w.matrix_shape(name);
    QCOMPARE(rows, int64_t(4 * 64));
    QCOMPARE(cols, int64_t(64));
    const std::vector<float>& orig = w.at(name);

    const DecodeWeights b = w.as_format(DecodeSpec::parse("bf16", 32));
    for (size_t i = 0; i < orig.size(); ++i) QCOMPARE(b.at(name)[i], round_to(DType::BF16, orig[i]));

    const DecodeWeights q = w.as_format(DecodeSpec::parse("int4", 32));
    std::vector<float> expect(orig.size());
    fake_quantize_host(orig.data(), expect.data(), rows * cols, 4, 32);
    for (size_t i = 0; i < orig.size(); ++i) QCOMPARE(q.at(name)[i], expect[i]);
    // Per channel int8: one scale a row of 64.
    const DecodeWeights c = w.as_format(DecodeSpec::parse("int8", 32));
    fake_quantize_host(orig.data(), expect.data(), rows * cols, 8, cols);
    for (size_t i = 0; i < orig.size(); ++i) QCOMPARE(c.at(name)[i], expect[i]);
    // Embeddings, biases and LayerNorm stay fp32.
    QCOMPARE(q.at("tok.weight"), w.at("tok.weight"));
    QCOMPARE(q.at("blocks.0.qkv.bias"), w.at("blocks.0.qkv.bias"));
    QVERIFY_THROWS_EXCEPTION(Error, w.at("blocks.9.fc.weight"));
  }

  void cpuDecoderAndGenerationLoop() {
    RandomGpt model(4);
    const DecodeWeights& w = model.w;
    auto dec = make_decoder(model.be, w, DecodeSpec{});
    CharGptGenerator gen(model.be, *model.net);
    const std::vector<int32_t> prompt{3, 1, 4};
    SampleOptions s;
    s.temperature = 0.9f, s.top_k = 6, s.seed = 11;
    // 30 tokens over a 12-position window: restarts included.
    QCOMPARE(generate_tokens(*dec, prompt, 30, s), gen.generate(prompt, 30, s));
    // The fp32 decoder reads every weight once (4 bytes each) plus two embedding rows.
    int64_t floats = 0;
    for (const auto& [name, v] : w.tensors)
      if (name != "tok.weight" && name != "pos.weight") floats += static_cast<int64_t>(v.size());
    QCOMPARE(dec->weight_bytes_per_token(), (floats + 2 * 64) * 4);
    QCOMPARE(dec->kv_bytes(0), int64_t(2 * 2 * 64 * 4));
    // An int4 CPU decoder computes with the dequantised values.
    const DecodeSpec i4 = DecodeSpec::parse("int4", 32);
    auto d4 = make_decoder(model.be, w, i4);
    CharGptGenerator ref(w.as_format(i4));
    d4->reset();
    ref.reset();
    for (int32_t t : prompt) {
      d4->push(t);
      ref.push(t);
    }
    QCOMPARE(d4->logits(), ref.logits());
    QVERIFY(d4->logits() != dec->logits());
  }

  // Batched decoding on the CPU (DecodeSpec::batch): row b of every push_batch is bit-identical to
  // sequence b decoded alone (the rows share each weight read, their sums keep their order); the KV
  // bytes count every sequence's cache; a wrong token count or batch size is a clear error; the
  // decode benchmark measures each batch (tokens of all sequences).
  void cpuBatchedDecoding() {
    RandomGpt model(6);
    DecodeSpec spec = DecodeSpec::parse("int4", 32);
    spec.batch = 3;
    auto dec = make_decoder(model.be, model.w, spec);
    QCOMPARE(dec->batch(), int64_t(3));
    std::vector<std::unique_ptr<TokenDecoder>> alone;
    for (int b = 0; b < 3; ++b) alone.push_back(make_decoder(model.be, model.w, DecodeSpec::parse("int4", 32)));
    const auto V = static_cast<size_t>(model.w.shape.padded_vocab);
    for (int i = 0; i < 10; ++i) {
      const std::vector<int32_t> toks{int32_t(i % 17), int32_t((5 * i + 3) % 17), int32_t((11 * i + 7) % 17)};
      const std::vector<float> rows = dec->push_batch(toks);
      QCOMPARE(rows.size(), 3 * V);
      for (size_t b = 0; b < 3; ++b) {
        alone[b]->push(toks[b]);
        QVERIFY(std::equal(alone[b]->logits().begin(), alone[b]->logits().end(), rows.begin() + static_cast<std::ptrdiff_t>(b * V)));
      }
    }
    QCOMPARE(dec->length(), int64_t(10));
    QCOMPARE(dec->kv_bytes(4), 3 * alone[0]->kv_bytes(4));
    QVERIFY_THROWS_EXCEPTION(Error, dec->push_batch({1, 2}));
    QVERIFY_THROWS_EXCEPTION(Error, alone[0]->push_batch({1, 2}));
    spec.batch = 17;
    QVERIFY_THROWS_EXCEPTION(Error, make_decoder(model.be, model.w, spec));
  }

  // A set stop flag ends generation after the token in progress (the app's text panel sets it as
  // its window closes): the same tokens as without it while it is clear, none when it is set
  // before, and a long generation ends early when another thread sets it.
  void generationStopsWhenAsked() {
    RandomGpt model(4);
    auto dec = make_decoder(model.be, model.w, DecodeSpec{});
    const std::vector<int32_t> prompt{3, 1, 4};
    SampleOptions s;
    s.temperature = 0.9f, s.top_k = 6, s.seed = 11;
    const auto all = generate_tokens(*dec, prompt, 30, s);
    std::atomic<bool> stop{false};
    s.stop = &stop;
    QCOMPARE(generate_tokens(*dec, prompt, 30, s), all);
    stop = true;
    double tps = -1;
    QVERIFY(generate_tokens(*dec, prompt, 30, s, &tps).empty());
    QCOMPARE(tps, 0.0);
    stop = false;
    const int64_t n = 100000000;  // far more tokens than the test would wait for
    std::thread stopper([&stop] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      stop = true;
    });
    const auto some = generate_tokens(*dec, prompt, n, s);
    stopper.join();
    QVERIFY(!some.empty() && static_cast<int64_t>(some.size()) < n);
  }

  void shapeAndValidation() {
    // A char-gpt with a padded vocabulary: 17 tokens, 64 rows of tok.weight and head.weight.
    CpuBackend be(1);
    CharGptConfig c;
    c.vocab = 17, c.pad_vocab = true;
    c.layers = 2, c.heads = 2, c.dim = 64, c.context = 12;
    CharGpt net(be, c, 5);
    const DecodeWeights w = decode_weights(be, net);
    QCOMPARE(w.shape.vocab, int64_t(17));
    QCOMPARE(w.shape.padded_vocab, int64_t(64));
    QCOMPARE(w.shape.layers, int64_t(2));
    QCOMPARE(w.shape.context, int64_t(12));
    QCOMPARE(int(w.tensors.size()), int(DecodeWeights::all_names(w.shape).size()));
    w.validate();
    QCOMPARE(int64_t(w.at("tok.weight").size()), w.shape.padded_vocab * 64);
    // The decoder reports the shape it was built with (generate_tokens reads vocab and context).
    CharGptGenerator gen(w);
    QCOMPARE(gen.shape().padded_vocab, w.shape.padded_vocab);
    QCOMPARE(int64_t(gen.logits().size()), w.shape.padded_vocab);
    // A missing tensor or one of the wrong size is named; so is an inconsistent shape.
    DecodeWeights missing = w;
    missing.tensors.erase("blocks.1.ln2.bias");
    QVERIFY_THROWS_EXCEPTION(Error, missing.validate());
    QVERIFY_THROWS_EXCEPTION(Error, CharGptGenerator{missing});
    DecodeWeights short_bias = w;
    short_bias.tensors.at("blocks.0.fc.bias").pop_back();
    QVERIFY_THROWS_EXCEPTION(Error, short_bias.validate());
    DecodeWeights odd = w;
    odd.shape.heads = 3;  // 64 is not a multiple of 3
    QVERIFY_THROWS_EXCEPTION(Error, odd.validate());
  }

  void samplingRule() {
    std::mt19937_64 rng(1);
    const std::vector<float> z{0.5f, 2.0f, 2.0f, -1.0f};
    SampleOptions greedy;
    greedy.temperature = 0.0f;
    QCOMPARE(sample_token(z.data(), 4, greedy, rng), 1);  // lowest index on ties
    SampleOptions top1;
    top1.temperature = 1.0f, top1.top_k = 1;
    int seen[4] = {0, 0, 0, 0};
    for (int i = 0; i < 40; ++i) ++seen[sample_token(z.data(), 4, top1, rng)];
    QCOMPARE(seen[0] + seen[3], 0);  // only the tied top two are ever drawn
    QVERIFY(seen[1] > 0 && seen[2] > 0);
  }
};

QTEST_APPLESS_MAIN(TestDecoder)
#include "test_decoder.moc"
