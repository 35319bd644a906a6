// A new user's first minutes in the window (issue 41): the first start on a fresh cache says in
// plain words that the CPU is measured once (no path, no byte count); switching the model from the
// first-run preset gives the new model's run and name and keeps (and marks) a field the user set;
// the app's --set switches the same way; a run started from the window records what ran; Lion
// chosen in the form gets its own rate, and the digits MLP then reaches 96.5 % in 30 epochs; the
// window fits a 1280x800 screen.
#include <QComboBox>
#include <QFile>
#include <QtTest>

#include "config_form.h"
#include "gui_support.h"
#include "main_window.h"

using namespace trainlab;
using namespace trainlab::app;

namespace {

Json read_json(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return Json();
  return Json::parse(f.readAll().toStdString());
}

}  // namespace

class TestFirstMinutes : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp, m_cache;

  // Starts the form's run (on the CPU, `steps` steps) and waits for its end; its config.json.
  Json run_from_window(MainWindow& w, int64_t steps) {
    w.form()->set_value("train.steps", steps);
    w.form()->set_value("device.name", std::string("cpu"));
    if (!w.start_run()) return Json();
    if (!QTest::qWaitFor([&w] { return !w.running(); }, 120000)) return Json();
    return read_json(w.live_run()->dir + "/config.json");
  }

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_first_minutes");
    qputenv("XDG_CACHE_HOME", m_cache.path().toUtf8());  // a fresh cache: this CPU never measured
  }
  void cleanupTestCase() { qunsetenv("XDG_CACHE_HOME"); }

  void firstStartOnAFreshCacheSaysItPlainly() {
    MainWindow w(m_tmp.filePath("runs0"));
    w.show();
    w.prepare_first_launch();
    QVERIFY(!run_from_window(w, 20).is_null());
    const QString msg = w.message_text();
    QVERIFY2(msg.contains("Measuring this CPU's speed once (about "), qPrintable(msg));
    QVERIFY2(msg.contains("for MFU and the roofline"), qPrintable(msg));
    for (const char* technical : {"bytes", ".json", "calibration-", "trainlab/", " ns "})
      QVERIFY2(!msg.contains(technical), qPrintable(msg));
  }

  void switchingTheModelGivesItsRunAndKeepsTheUsersField() {
    MainWindow w(m_tmp.filePath("runs1"));
    w.show();
    w.prepare_first_launch();
    ConfigForm* f = w.form();
    QCOMPARE(f->value("train.epochs"), Json(800));
    f->set_value("train.batch", int64_t{16});  // the user's own
    QVERIFY(f->user_keys().contains("train.batch"));
    QVERIFY(f->editor("train.batch")->toolTip().contains("Set by you"));
    qobject_cast<QComboBox*>(f->editor("model.name"))->setCurrentText("char-gpt");
    QCOMPARE(f->value("train.steps"), Json(1200));
    QCOMPARE(f->value("train.epochs"), Json(30));
    QCOMPARE(f->value("train.eval_every"), Json(100));
    QCOMPARE(f->value("optim.lr").get<double>(), 2e-3);
    QCOMPARE(f->value("run.name"), Json("char-gpt tiny"));
    QCOMPARE(f->value("data.name"), Json("tinyshakespeare"));
    QCOMPARE(f->value("train.batch"), Json(16));  // kept
    QVERIFY(!f->editor("train.steps")->toolTip().contains("Set by you"));
    const QString msg = w.message_text();
    QVERIFY2(msg.contains("Defaults of char-gpt tiny") && msg.contains("kept your Batch"), qPrintable(msg));
    // Started from the window, its record holds char-gpt's keys and the text it read.
    f->set_value("train.eval_windows", int64_t{8});
    const Json j = run_from_window(w, 2);
    QVERIFY(!j.is_null());
    QCOMPARE(j.at("data").at("name"), Json("tinyshakespeare"));
    QVERIFY(!j.at("model").contains("hidden"));
    QVERIFY(!j.at("model").contains("activation"));
    QCOMPARE(j.at("train").at("batch"), Json(16));
    QCOMPARE(j.at("run").at("name"), Json("char-gpt tiny"));
    // And an MLP's: none of the transformer's keys.
    qobject_cast<QComboBox*>(f->editor("model.name"))->setCurrentText("mlp");
    QCOMPARE(f->value("data.name"), Json("digits"));
    const Json m = run_from_window(w, 2);
    QVERIFY(!m.is_null());
    QVERIFY(!m.at("model").contains("preset"));
    QVERIFY(!m.contains("checkpoint"));
    QCOMPARE(m.at("data").at("name"), Json("digits"));
  }

  // trainlab --set model.name=char-gpt --set model.preset=tiny on the first-run preset.
  void theAppsSetSwitchesLikeTheForm() {
    MainWindow w(m_tmp.filePath("runs2"));
    w.prepare_first_launch();
    w.form()->apply_user_settings({{"model.name", "char-gpt"}, {"model.preset", "tiny"}});
    QCOMPARE(w.form()->value("train.steps"), Json(1200));
    QCOMPARE(w.form()->value("train.batch"), Json(32));
    QCOMPARE(w.form()->value("run.name"), Json("char-gpt tiny"));
    QVERIFY(w.form()->user_keys().contains("model.name"));
    // A key given with --set is the user's: kept.
    w.prepare_first_launch();
    w.form()->apply_user_settings({{"model.name", "char-gpt"}, {"train.steps", "300"}});
    QCOMPARE(w.form()->value("train.steps"), Json(300));
    QVERIFY_THROWS_EXCEPTION(Error, w.form()->apply_user_settings({{"train.batch", "zero"}}));
  }

  // On a 1280x800 laptop screen the window fits, with a long runs folder path (it was 1375 pixels
  // wide at least: the path and the overlay hint of the runs bar were never shortened).
  void theWindowFitsALaptopScreen() {
    MainWindow w(m_tmp.filePath("a/runs/folder/whose/path/is/long/enough/to/fill/a/laptop/screen/alone"));
    w.resize(1280, 800);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY2(w.width() <= 1280 && w.height() <= 800, qPrintable(QString("%1 x %2").arg(w.width()).arg(w.height())));
  }

  void lionChosenInTheFormGetsItsRate() {
    ConfigForm f;
    f.set_config(Config());
    qobject_cast<QComboBox*>(f.editor("optim.name"))->setCurrentText("lion");
    QCOMPARE(f.value("optim.lr").get<double>(), 1e-4);
    QCOMPARE(f.value("optim.beta2").get<double>(), 0.99);
    QCOMPARE(f.value("optim.weight_decay").get<double>(), 0.1);
    QVERIFY(f.editor("optim.lr")->toolTip().contains("Lion takes a tenth of AdamW"));
    Config c = f.config();
    c.set("device.name", "cpu");
    c.set("run.save_weights", "false");
    c.set_json("run.out", m_tmp.filePath("lion").toStdString());
    Trainer t(c);
    const RunSummary s = t.run();
    QCOMPARE(c.get_int("train.epochs"), int64_t{30});
    QVERIFY2(s.test_accuracy >= 0.965, qPrintable(QString::number(s.test_accuracy)));
  }
};

QTEST_MAIN(TestFirstMinutes)
#include "test_first_minutes.moc"
