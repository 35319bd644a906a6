// The text panel generates with a trained char-gpt run (a few training steps suffice to exercise
// loading, the vocabulary and KV-cache sampling), also of a run on non-ASCII text (whole
// characters in the prompt and the output); several samples side by side; a digits run gives a
// message, not a crash.
#include <QComboBox>
#include <QFile>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QFileInfo>
#include <QtTest>
#include <fstream>

#include "gui_support.h"
#include "main_window.h"
#include "text_panel.h"
#include "decode/text_generation.h"

using namespace trainlab::app;

class TestTextPanel : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

  // A char-gpt run of a few steps on the CPU under runs/<name>: its folder.
  QString train_char_gpt(const QString& name) {
    trainlab::Config c;
    c.set("model.name", "char-gpt");
    c.set("train.steps", "3");
    c.set("train.batch", "8");
    c.set("device.name", "cpu");
    const QString dir = m_tmp.filePath("runs/" + name);
    c.set_json("run.out", dir.toStdString());
    trainlab::Trainer(c).run();
    return dir;
  }

 private slots:
  void initTestCase() { gui_test::isolate_settings("test_text_panel"); }

  void generatesWithCharGpt() {
    const QString dir = train_char_gpt("cg");
    QVERIFY(QFile::exists(dir + "/model.safetensors"));

    MainWindow w(m_tmp.filePath("runs"));
    w.reopen(dir);  // a char-gpt run opens the text panel with its weights
    QVERIFY(w.text_panel()->weights().endsWith("model.safetensors"));
    QSignalSpy spy(w.text_panel(), &TextPanel::generated);
    QVERIFY(w.text_panel()->generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 1, 30000);
    QVERIFY2(spy.at(0).at(0).toBool(), qPrintable(spy.at(0).at(1).toString()));
    QVERIFY(w.text_panel()->output().startsWith("ROMEO:"));
    QVERIFY(w.text_panel()->output().size() > 100);
    QVERIFY(w.text_panel()->tokens_per_s() > 0);

    // Speculative decoding with the run's own weights as the draft (the int4 copy or a smaller
    // model in practice): at temperature 0 the same text, every proposal accepted, and the label
    // shows the figures.
    TextPanel& p = *w.text_panel();
    p.findChild<QDoubleSpinBox*>()->setValue(0.0);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 2, 30000);
    const QString greedy = p.output();
    p.set_draft(dir, 3);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 3, 30000);
    QVERIFY2(spy.at(2).at(0).toBool(), qPrintable(spy.at(2).at(1).toString()));
    QCOMPARE(p.output(), greedy);
    QCOMPARE(p.acceptance_rate(), 1.0);
    QVERIFY(p.speedup() > 0);
    const QString speed = p.findChild<QLabel*>("speed")->text();
    QVERIFY2(speed.contains("K = 3") && speed.contains("100.0% accepted"), qPrintable(speed));
    // A draft file that is not there: a message in the window.
    p.set_draft(m_tmp.filePath("missing.safetensors"), 2);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 4, 30000);
    QVERIFY(!spy.at(3).at(0).toBool());
    QVERIFY(p.output().startsWith("Cannot generate"));
  }

  // Samples side by side: a labelled block each, the tokens/s of all of them, and the texts the
  // library (and so `trainlab-cli generate --samples 3`, seed 1) gives; at temperature 0 every
  // sample is the one greedy text; with a draft a message naming both options.
  void generatesSamplesSideBySide() {
    const QString dir = train_char_gpt("samples");
    TextPanel p;
    p.set_weights(dir);
    auto* count = p.findChild<QSpinBox*>("samples");
    QVERIFY(count);
    QCOMPARE(count->minimum(), 1);
    QCOMPARE(count->maximum(), 16);
    QCOMPARE(count->value(), 1);
    p.findChild<QSpinBox*>("characters")->setValue(60);
    count->setValue(3);
    QSignalSpy spy(&p, &TextPanel::generated);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 1, 30000);
    QVERIFY2(spy.at(0).at(0).toBool(), qPrintable(spy.at(0).at(1).toString()));
    QCOMPARE(p.samples().size(), 3);
    trainlab::GenerateRequest r;
    r.weights = p.weights().toStdString();
    r.prompt = "ROMEO:";
    r.tokens = 60;
    r.sample.temperature = 0.8f;  // the panel's default
    r.samples = 3;
    const trainlab::GenerateResult want = trainlab::generate_text(r);
    for (int b = 0; b < 3; ++b) {
      QCOMPARE(p.samples()[b], QString::fromStdString("ROMEO:" + want.samples[static_cast<size_t>(b)]));
      QVERIFY(p.output().contains(QString("sample %1 of 3").arg(b + 1)));
      QVERIFY(p.output().contains(p.samples()[b]));
    }
    QVERIFY(p.samples()[0] != p.samples()[1]);
    const QString speed = p.findChild<QLabel*>("speed")->text();
    QVERIFY2(speed.contains("tokens/s over all 3 samples"), qPrintable(speed));
    QVERIFY(p.tokens_per_s() > 0);

    p.findChild<QDoubleSpinBox*>()->setValue(0.0);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 2, 30000);
    const QStringList greedy = p.samples();
    count->setValue(1);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 3, 30000);
    QCOMPARE(p.samples().size(), 1);
    QCOMPARE(p.output(), p.samples()[0]);  // one sample: the text alone, no label
    for (const QString& g : greedy) QCOMPARE(g, p.output());

    count->setValue(2);
    p.set_draft(dir, 2);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 4, 30000);
    QVERIFY(!spy.at(3).at(0).toBool());
    QVERIFY2(p.output().contains("--samples 2 with --draft"), qPrintable(p.output()));
  }

  // Device and Format choose the decoder as `generate --device --weight-format` do: int4 on the
  // CPU gives the library's int4 text (greedy), the line names the format; "GPU if there is one"
  // runs where the library runs it (and says why when that is the CPU); unknown choices refused.
  void decodesOnTheChosenDeviceAndFormat() {
    const QString dir = train_char_gpt("formats");
    TextPanel p;
    p.set_weights(dir);
    QCOMPARE(p.findChild<QComboBox*>("device")->currentData().toString(), QString("cpu"));
    QCOMPARE(p.findChild<QComboBox*>("format")->currentData().toString(), QString(""));
    QVERIFY(!p.set_device("tpu"));
    QVERIFY(!p.set_format("int3"));
    p.findChild<QSpinBox*>("characters")->setValue(40);
    p.findChild<QDoubleSpinBox*>()->setValue(0.0);
    QVERIFY(p.set_format("int4"));
    QSignalSpy spy(&p, &TextPanel::generated);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 1, 30000);
    QVERIFY2(spy.at(0).at(0).toBool(), qPrintable(spy.at(0).at(1).toString()));
    trainlab::GenerateRequest r;
    r.weights = p.weights().toStdString();
    r.prompt = "ROMEO:";
    r.tokens = 40;
    r.sample.temperature = 0.0f;
    r.format = trainlab::DecodeSpec::parse("int4", 32);
    const trainlab::GenerateResult want = trainlab::generate_text(r);
    QCOMPARE(p.output(), QString::fromStdString("ROMEO:" + want.text));
    QString speed = p.findChild<QLabel*>("speed")->text();
    QVERIFY2(speed.contains("int4-g32"), qPrintable(speed));

    QVERIFY(p.set_device("auto"));
    QVERIFY(p.set_format(""));
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 2, 30000);
    QVERIFY2(spy.at(1).at(0).toBool(), qPrintable(spy.at(1).at(1).toString()));
    r.device = "auto";
    r.format.reset();
    const trainlab::GenerateResult lib = trainlab::generate_text(r);
    speed = p.findChild<QLabel*>("speed")->text();
    QVERIFY2(speed.contains(QString::fromStdString(lib.device)) && speed.contains("fp32"), qPrintable(speed));
    if (!lib.notice.empty()) QVERIFY2(speed.contains(QString::fromStdString(lib.notice)), qPrintable(speed));
  }

  // How a GPU runs a token (--one-kernel, --no-graph) is chosen in the window too: the control
  // follows the device (off on the CPU, where there is one decoder), unknown modes are refused,
  // and the choice gives the same text (here without a GPU: "GPU if there is one" on the CPU).
  void gpuDecoderFollowsTheDevice() {
    const QString dir = train_char_gpt("gpu-decoder");
    TextPanel p;
    p.set_weights(dir);
    auto* mode = p.findChild<QComboBox*>("gpu_decoder");
    QVERIFY(mode);
    QCOMPARE(mode->currentData().toString(), QString("graph"));
    QVERIFY(!mode->isEnabled());
    QVERIFY(p.set_device("cuda"));
    QVERIFY(mode->isEnabled());
    QVERIFY(p.set_device("auto"));
    QVERIFY(mode->isEnabled());
    QVERIFY(!p.set_gpu_decoder("persistent"));
    p.findChild<QSpinBox*>("characters")->setValue(30);
    p.findChild<QDoubleSpinBox*>()->setValue(0.0);
    QSignalSpy spy(&p, &TextPanel::generated);
    QStringList texts;
    for (const char* m : {"graph", "one", "eager"}) {
      QVERIFY(p.set_gpu_decoder(m));
      QVERIFY(p.generate());
      QTRY_VERIFY_WITH_TIMEOUT(spy.count() == texts.size() + 1, 30000);
      QVERIFY2(spy.back().at(0).toBool(), qPrintable(spy.back().at(1).toString()));
      texts << p.output();
    }
    QCOMPARE(texts.at(1), texts.at(0));
    QCOMPARE(texts.at(2), texts.at(0));
    QVERIFY(p.set_device("cpu"));
    QVERIFY(!mode->isEnabled());
  }

  // A char-gpt run started in the window is offered for generation as soon as it ends, without
  // reopening it (issue 21: the panel kept the run chosen before).
  void offersTheRunThatJustFinished() {
    MainWindow w(m_tmp.filePath("runs-live"));
    trainlab::Config c = w.form()->config();
    c.set("model.name", "char-gpt");
    c.set("train.steps", "3");
    c.set("train.batch", "8");
    c.set("device.name", "cpu");
    w.form()->set_config(c);
    QVERIFY(w.start_run());
    const QString dir = w.live_run()->dir;
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 60000);
    QVERIFY(QFile::exists(dir + "/model.safetensors"));
    QCOMPARE(QFileInfo(w.text_panel()->weights()).absolutePath(), QFileInfo(dir + "/model.safetensors").absolutePath());
    QVERIFY(w.text_panel()->isVisibleTo(&w));
  }

  // A run on text with "é", "—", "日本" and an emoji (it used to fail at the save): the panel takes
  // a prompt of those characters and shows whole characters of the text's vocabulary.
  void generatesWholeCharacters() {
    const QString words[] = {"café ", "naïve ", "— ", "日本 ", "語 ", "😀 ", "hello ", "world\n"};
    QString text;
    for (int i = 0; text.size() < 40000; ++i) text += words[(i * 7 + i / 3) % 8];
    const QString file = m_tmp.filePath("unicode.txt");
    std::ofstream(file.toStdString(), std::ios::binary) << text.toStdString();
    trainlab::Config c;
    c.set("model.name", "char-gpt");
    c.set("train.steps", "3");
    c.set("train.batch", "8");
    c.set("device.name", "cpu");
    c.set("data.name", "text");
    c.set_json("data.path", file.toStdString());
    const QString dir = m_tmp.filePath("runs/unicode");
    c.set_json("run.out", dir.toStdString());
    trainlab::Trainer(c).run();
    QVERIFY(QFile::exists(dir + "/model.safetensors"));

    TextPanel p;
    p.set_weights(dir);
    p.findChild<QLineEdit*>("prompt")->setText("日本 é—😀");
    QSignalSpy spy(&p, &TextPanel::generated);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 1, 30000);
    QVERIFY2(spy.at(0).at(0).toBool(), qPrintable(spy.at(0).at(1).toString()));
    const QString out = p.output();
    QVERIFY(out.startsWith("日本 é—😀"));
    const QList<uint> chars = out.toUcs4();
    QVERIFY(chars.size() > 100);
    const QList<uint> vocab = text.toUcs4();
    for (uint ch : chars) QVERIFY2(vocab.contains(ch), qPrintable(QString("U+%1").arg(ch, 4, 16, QChar('0'))));
  }

  void digitsWeightsGiveMessage() {
    trainlab::Config c;
    c.set("train.steps", "2");
    c.set("device.name", "cpu");
    const QString dir = m_tmp.filePath("runs/digits");
    c.set_json("run.out", dir.toStdString());
    trainlab::Trainer(c).run();
    TextPanel p;
    p.set_weights(dir);
    QSignalSpy spy(&p, &TextPanel::generated);
    QVERIFY(p.generate());
    QTRY_VERIFY_WITH_TIMEOUT(spy.count() == 1, 30000);
    QVERIFY(!spy.at(0).at(0).toBool());
    QVERIFY(p.output().contains("char-gpt"));
  }
};

QTEST_MAIN(TestTextPanel)
#include "test_text_panel.moc"
