// The character transformer from the window's controls: preset and dimensions, checkpointing,
// accumulation, vocabulary padding and dropout reach the run (its config and weights' shapes),
// choosing char-gpt switches the data set to text, the run learns (its losses fall below stated
// bounds), and the memory plot draws the activations against their prediction
// (plan/memory_model.h), which equals the measured bytes.
#include <QComboBox>
#include <QFile>
#include <QtTest>
#include <cmath>
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
    qInfo("char-gpt activations: measured %.0f, predicted %.0f bytes", measured, predicted);
    QVERIFY(measured > 0);
    QCOMPARE(predicted, measured);
    // It learns: 8 steps of 2 x 4 windows of 32 tokens (AdamW, lr 1e-3). A uniform guess over the
    // 128-row padded vocabulary scores ln(128) = 4.85; the first step, with N(0, 1) embeddings,
    // scores about 5.05. The CPU run is deterministic (validation 4.37, last training loss 4.57);
    // the bounds (validation below ln(128) - 0.3 = 4.55, training 0.25 below the first step's)
    // leave about 0.2 for changes of summation order, and fail for a run that does not learn.
    qInfo("char-gpt losses: first %.4f, last %.4f, validation %.4f", run->loss.front(), run->loss.back(),
          run->val_loss.back());
    QCOMPARE(run->val_loss.size(), 2);
    QVERIFY2(run->val_loss.back() < std::log(128.0) - 0.3, qPrintable(QString::number(run->val_loss.back())));
    QVERIFY2(run->loss.back() < run->loss.front() - 0.25,
             qPrintable(QString("first %1, last %2").arg(run->loss.front()).arg(run->loss.back())));
    // The text panel opens on the run's weights (128-row padded vocabulary and all).
    QVERIFY(QFile::exists(run->dir + "/model.safetensors"));
  }
};

QTEST_MAIN(TestCharRun)
#include "test_char_run.moc"
