// The controls are generated from the config schema: one per key, tooltips from the help text,
// round trip through Config, only mid-run keys editable while training; presets load and save.
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QGroupBox>
#include <QLineEdit>
#include <QtTest>

#include "config_form.h"
#include "gui_support.h"
#include "main_window.h"
#include "util/paths.h"

using namespace trainlab;
using namespace trainlab::app;

class TestConfigForm : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() { gui_test::isolate_settings("test_config_form"); }

  void everyKeyHasAControl() {
    ConfigForm f;
    for (const auto& k : config_schema()) {
      QWidget* e = f.editor(k.key);
      QVERIFY2(e, k.key.c_str());
      QVERIFY2(e->toolTip().contains(QString::fromStdString(k.help).toHtmlEscaped().left(40)), k.key.c_str());
      if (k.type == KeyType::Enum) {
        auto* c = qobject_cast<QComboBox*>(e);
        QVERIFY(c);
        QCOMPARE(c->count(), static_cast<int>(k.choices.size()));
      }
      if (k.type == KeyType::Bool) QVERIFY(qobject_cast<QCheckBox*>(e));
    }
    QCOMPARE(f.keys().size(), static_cast<int>(config_schema().size()));
  }

  // The Fine-tune section: the run to start from, method, rank, alpha and targets, as keys.
  void fineTuneSection() {
    ConfigForm f;
    auto* box = f.findChild<QGroupBox*>("section_finetune");
    QVERIFY(box);
    QVERIFY(box->title().startsWith("Fine-tune"));
    for (const char* key : {"compress.init_from", "finetune.method", "finetune.rank", "finetune.alpha", "finetune.targets"})
      QVERIFY2(box->isAncestorOf(f.editor(key)), key);
    static_cast<QLineEdit*>(f.editor("compress.init_from"))->setText("runs/shakespeare");
    auto* method = qobject_cast<QComboBox*>(f.editor("finetune.method"));
    method->setCurrentText("qlora");
    Config c;
    c.set("compress.init_from", "runs/shakespeare");
    c.set("finetune.method", "qlora");
    c.set("finetune.rank", "4");
    c.set("finetune.alpha", "8");
    c.set("finetune.targets", "qkv,head");
    f.set_config(c);
    const Config back = f.config();
    QCOMPARE(back.get_string("finetune.method"), std::string("qlora"));
    QCOMPARE(back.get_int("finetune.rank"), int64_t{4});
    QCOMPARE(back.get_float("finetune.alpha"), 8.0);
    QCOMPARE(back.get_string("finetune.targets"), std::string("qkv,head"));
    QCOMPARE(back.get_string("compress.init_from"), std::string("runs/shakespeare"));
  }

  void roundTrip() {
    ConfigForm f;
    Config c;
    c.set("optim.lr", "0.0025");
    c.set("precision.dtype", "bf16");
    c.set("model.hidden", "128,64");
    c.set("train.steps", "77");
    c.set("optim.nesterov", "true");
    f.set_config(c);
    const Config back = f.config();
    QVERIFY2(Config::differences(c, back).empty(), Config::differences(c, back).empty() ? "" : Config::differences(c, back)[0].c_str());
    QCOMPARE(back.get_float("optim.lr"), 0.0025);
  }

  void liveKeysWhileRunning() {
    ConfigForm f;
    QSignalSpy spy(&f, &ConfigForm::live_changed);
    f.set_running(true);
    for (const auto& k : config_schema())
      if (!k.mid_run) QVERIFY2(!f.editor(k.key)->isEnabled(), k.key.c_str());
    for (const char* live : {"precision.dtype", "optim.lr", "train.accumulate"}) QVERIFY(f.editor(live)->isEnabled());
    QVERIFY(!f.editor("train.batch")->isEnabled());
    f.set_value("optim.lr", 0.01);
    QCOMPARE(spy.count(), 1);
    QCOMPARE(spy.at(0).at(0).toString(), QString("optim.lr"));
    f.set_running(false);
    QVERIFY(f.editor("train.batch")->isEnabled());
    f.set_value("optim.lr", 0.02);
    QCOMPARE(spy.count(), 1);  // not running: no live change
  }

  void shippedPresetsLoad() {
    for (const char* name : {"presets/digits-fp32.json", "presets/digits-bf16.json"}) {
      const std::string p = find_resource(name);
      const Config c = Config::from_file(p);
      QCOMPARE(QString::fromStdString(c.get_string("model.name")), QString("digits-mlp"));
    }
    MainWindow w(QDir::temp().filePath("trainlab-test-presets-runs"));
    QVERIFY(w.load_preset(QString::fromStdString(find_resource("presets/digits-bf16.json"))));
    QCOMPARE(QString::fromStdString(w.form()->value("precision.dtype").get<std::string>()), QString("bf16"));
    QTemporaryDir tmp;
    const QString out = tmp.filePath("saved.json");
    w.form()->set_value("optim.lr", 0.004);
    QVERIFY(w.save_preset(out));
    const Config back = Config::from_file(out.toStdString());
    QCOMPARE(back.get_float("optim.lr"), 0.004);
    QCOMPARE(QString::fromStdString(back.get_string("precision.dtype")), QString("bf16"));
  }
};

QTEST_MAIN(TestConfigForm)
#include "test_config_form.moc"
