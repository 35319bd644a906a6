// The form shows the chosen model's fields only: with the character transformer, no MLP hidden
// sizes or activation and the data set it trains on (tinyshakespeare, not digits); its dimensions
// left at 0 ("from model.preset") show the preset's values, and the arrows step from them.
#include <QComboBox>
#include <QSpinBox>
#include <QtTest>

#include "config_form.h"
#include "gui_support.h"

using namespace trainlab;
using namespace trainlab::app;

class TestConfigFormModels : public QObject {
  Q_OBJECT
 private:
  static bool shown(const ConfigForm& f, const char* key) { return f.editor(key)->isVisibleTo(&f); }
  static QString text(const ConfigForm& f, const char* key) { return qobject_cast<QSpinBox*>(f.editor(key))->text(); }

 private slots:
  void initTestCase() { gui_test::isolate_settings("test_config_form_models"); }

  void charGptHidesTheMlpFields() {
    ConfigForm f;
    Config c;
    c.set("model.name", "char-gpt");
    f.set_config(c);
    QVERIFY(!shown(f, "model.hidden"));
    QVERIFY(!shown(f, "model.activation"));
    QVERIFY(!shown(f, "data.test_fraction"));  // the digits' split
    for (const char* key : {"model.preset", "model.layers", "model.heads", "model.dim", "model.context"})
      QVERIFY2(shown(f, key), key);
    QCOMPARE(qobject_cast<QComboBox*>(f.editor("data.name"))->currentText(), QString("tinyshakespeare"));
    // Back to an MLP: its fields return, the transformer's go.
    f.set_value("model.name", std::string("mlp"));
    QVERIFY(shown(f, "model.hidden"));
    QVERIFY(shown(f, "model.activation"));
    QVERIFY(!shown(f, "model.layers"));
  }

  void mlpHidesTheTransformerFields() {
    ConfigForm f;
    f.set_config(Config());
    QVERIFY(shown(f, "model.activation"));
    for (const char* key : {"model.preset", "model.layers", "model.heads", "model.dim", "model.context"})
      QVERIFY2(!shown(f, key), key);
  }

  void dimensionsShowThePresetsValues() {
    ConfigForm f;
    Config c;
    c.set("model.name", "char-gpt");
    f.set_config(c);
    QCOMPARE(text(f, "model.layers"), QString("2 (preset)"));
    QCOMPARE(text(f, "model.heads"), QString("4 (preset)"));
    QCOMPARE(text(f, "model.dim"), QString("128 (preset)"));
    QCOMPARE(text(f, "model.context"), QString("64 (preset)"));
    f.set_value("model.preset", std::string("small"));
    QCOMPARE(text(f, "model.layers"), QString("6 (preset)"));
    QCOMPARE(text(f, "model.dim"), QString("384 (preset)"));
    QCOMPARE(text(f, "model.context"), QString("256 (preset)"));
    // The config still says "from the preset".
    QCOMPARE(f.config().get_int("model.layers"), int64_t(0));
    // An explicit value shows as itself.
    f.set_value("model.heads", int64_t(3));
    QCOMPARE(text(f, "model.heads"), QString("3"));
  }

  void arrowsStepFromThePresetsValue() {
    ConfigForm f;
    Config c;
    c.set("model.name", "char-gpt");
    f.set_config(c);
    auto* layers = qobject_cast<QSpinBox*>(f.editor("model.layers"));
    layers->stepBy(1);
    QCOMPARE(layers->value(), 3);
    auto* dim = qobject_cast<QSpinBox*>(f.editor("model.dim"));
    dim->stepBy(-1);
    QCOMPARE(dim->value(), 127);
  }
};

QTEST_MAIN(TestConfigFormModels)
#include "test_config_form_models.moc"
