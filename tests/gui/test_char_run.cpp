// The character transformer from the window's controls: preset and dimensions, checkpointing,
// accumulation, vocabulary padding and dropout reach the run (its config and weights' shapes),
// choosing char-gpt switches the data set to text, and the memory plot draws the activations
// against CharGpt::predicted_activation_bytes.
#include <QComboBox>
#include <QFile>
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "main_window.h"

using namespace trainlab;
using namespace trainlab::app;

class TestCharRun : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_char_run");
    QVERIFY(m_tmp.isValid());
  }

  void controlsReachTheRun() {
    MainWindow w(m_tmp.filePath("runs"));
    w.show();
    ConfigForm* f = w.form();
    // The transformer's controls are greyed out for the MLP and live for char-gpt.
    QVERIFY(!f->editor("model.preset")->isEnabled());
    qobject_cast<QComboBox*>(f->editor("model.name"))->setCurrentText("char-gpt");
    for (const char* k : {"model.preset", "model.layers", "model.heads", "model.dim", "model.context", "model.pad_vocab",
                          "model.dropout", "checkpoint.policy", "train.accumulate"})
      QVERIFY2(f->editor(k)->isEnabled(), k);
    QVERIFY(!f->editor("model.hidden")->isEnabled());
    QVERIFY(!f->editor("model.activation")->isEnabled());
    // A text data set follows the model choice.
    QCOMPARE(f->value("data.name").get<std::string>(), std::string("tinyshakespeare"));
    f->set_value("model.preset", Json("tiny"));
    f->set_value("model.layers", Json(int64_t{2}));
    f->set_value("model.dim", Json(int64_t{64}));
    f->set_value("model.heads", Json(int64_t{2}));
    f->set_value("model.context", Json(int64_t{32}));
    f->set_value("model.pad_vocab", Json(true));
    f->set_value("model.dropout", Json(0.1));
    f->set_value("checkpoint.policy", Json("every-block"));
    f->set_value("train.accumulate", Json(int64_t{2}));
    f->set_value("train.batch", Json(int64_t{4}));
    f->set_value("train.steps", Json(int64_t{8}));
    f->set_value("train.eval_every", Json(int64_t{4}));
    f->set_value("train.eval_windows", Json(int64_t{8}));
    f->set_value("device.name", Json("cpu"));
    f->set_value("run.save_weights", Json(true));
    QVERIFY(w.start_run());
    QTRY_VERIFY_WITH_TIMEOUT(!w.running(), 120000);
    auto run = w.live_run();
    QVERIFY2(run->status() == "completed", qPrintable(w.message_text()));
    const Json flat = flatten_config(run->config);
    QCOMPARE(flat["model.layers"].get<int64_t>(), int64_t{2});
    QCOMPARE(flat["model.dim"].get<int64_t>(), int64_t{64});
    QCOMPARE(flat["checkpoint.policy"].get<std::string>(), std::string("every-block"));
    QCOMPARE(flat["train.accumulate"].get<int64_t>(), int64_t{2});
    QCOMPARE(flat["model.dropout"].get<double>(), 0.1);
    QVERIFY(flat["model.pad_vocab"].get<bool>());
    QCOMPARE(run->size(), 8);
    // Activations measured against the model's prediction, both on the memory plot.
    w.plots()->refresh();
    QCPGraph* pred = w.plots()->graph(PlotKind::Memory, "activations predicted");
    QVERIFY(pred);
    QCOMPARE(pred->dataCount(), 8);
    const double predicted = run->act_predicted.back();
    const double measured = run->mem[static_cast<size_t>(MemCategory::Activations)].back();
    QVERIFY(predicted > 0 && measured > 0);
    qInfo("char-gpt activations: measured %.0f, predicted %.0f bytes", measured, predicted);
    // The text panel opens on the run's weights (128-row padded vocabulary and all).
    QVERIFY(QFile::exists(run->dir + "/model.safetensors"));
  }
};

QTEST_MAIN(TestCharRun)
#include "test_char_run.moc"
