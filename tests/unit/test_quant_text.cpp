// Quantizing the character model's weights file (what `trainlab-cli quantize` does for char-gpt):
// every rank-2 weight packed (4 bits with groups of 32 is exactly 4.5 bits a weight), the file's
// model rebuilt from its architecture metadata, and the validation loss of the dequantized model
// close to the fp32 one at 8 bits and further off at 2 bits per tensor.
#include <QtTest>
#include <cmath>

#include "backend/cpu_backend.h"
#include "compress/compression.h"
#include "compress/quant.h"
#include "data/text.h"
#include "nn/transformer.h"
#include "util/paths.h"

using namespace trainlab;

class TestQuantText : public QObject {
  Q_OBJECT
 private slots:
  void quantizedCharModelLoss() {
    CpuBackend be(1);
    const TextCorpus corpus = load_text_corpus(find_resource("data/tinyshakespeare.txt"), 0.1, 1);
    CharGptConfig c;
    c.vocab = corpus.vocab(), c.layers = 1, c.heads = 2, c.dim = 64, c.context = 32;
    c.chars = corpus.chars_utf8();
    CharGpt m(be, c, 3);
    const SafeTensorsFile f = model_to_file(be, m);
    auto loss_of = [&](const SafeTensorsFile& file) { return file_text_val_loss(be, file, corpus.val, 24, 8, 1); };
    const double fp32 = loss_of(f);
    QVERIFY(std::isfinite(fp32) && fp32 > 1.0);
    QCOMPARE(loss_of(f), fp32);  // fixed windows: the same number twice

    QuantSpec s8;
    s8.bits = 8, s8.granularity = granularity_from_name("channel");
    QuantFileReport r8;
    const double l8 = loss_of(quantize_weights(f, QuantPlan::parse(s8, ""), &r8));
    QuantSpec s4;
    s4.bits = 4, s4.granularity = granularity_from_name("group"), s4.group = 32;
    QuantFileReport r4;
    const SafeTensorsFile q4 = quantize_weights(f, QuantPlan::parse(s4, ""), &r4);
    QCOMPARE(r4.bits_per_weight(), 4.5);
    QVERIFY(r4.quantized_weights > m.parameter_count() * 9 / 10);  // embeddings and head included
    const double l4 = loss_of(q4);
    QuantSpec s2;
    s2.bits = 2, s2.granularity = granularity_from_name("tensor");
    QuantFileReport r2;
    const double l2 = loss_of(quantize_weights(f, QuantPlan::parse(s2, ""), &r2));
    qInfo("val loss fp32 %.4f, int8/channel %.4f, int4/g32 %.4f, int2/tensor %.4f", fp32, l8, l4, l2);
    QVERIFY(std::fabs(l8 - fp32) < 0.01);
    QVERIFY(std::fabs(l2 - fp32) > std::fabs(l8 - fp32));
  }
};

QTEST_APPLESS_MAIN(TestQuantText)
#include "test_quant_text.moc"
