// ctest-labels: unit;no-asan
// A run's config.json says exactly what ran, for each model kind started each way from the command
// line (its flags, --set, a preset file): the data set it read and the model's own keys, none of
// another model's; a switched model brings its own run (length, batch, rate, name) and a switched
// optimizer its rate, unless given. `eval` of a char-gpt run's weights names the text it trained on.
// (The window's way: tests/gui/test_first_minutes.cpp.)
#include <QtTest>

#include "cli_support.h"
#include "config/config.h"

using namespace trainlab;
using trainlab::test::describe;
using trainlab::test::run_cli;

namespace {

QString preset(const char* name) { return QStringLiteral(TRAINLAB_SOURCE_DIR) + "/resources/presets/" + name; }

Json read_json(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return Json();
  return Json::parse(f.readAll().toStdString());
}

}  // namespace

class TestRunConfigRecords : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

  // Trains 2 steps on the CPU with `args` and returns the run's config.json.
  Json train(const QString& name, QStringList args) {
    const QString out = m_dir.filePath(name);
    args = QStringList{"train", "--device", "cpu", "--steps", "2", "--quiet", "--out", out, "--set",
                       "device.calibration=off"} + args;
    const auto r = run_cli(args, 120000);
    if (r.code != 0) qWarning("%s", qPrintable(describe(r)));
    return read_json(out + "/config.json");
  }

  static void verify_text_record(const Json& j) {
    QCOMPARE(j.at("model").at("name").get<std::string>(), std::string("char-gpt"));
    QCOMPARE(j.at("data").at("name").get<std::string>(), std::string("tinyshakespeare"));
    QVERIFY(!j.at("model").contains("hidden"));
    QVERIFY(!j.at("model").contains("activation"));
    QVERIFY(!j.at("data").contains("test_fraction"));
    QCOMPARE(j.at("model").at("preset").get<std::string>(), std::string("tiny"));
  }

  static void verify_mlp_record(const Json& j, bool hidden) {
    QCOMPARE(j.at("data").at("name").get<std::string>(), std::string("digits"));
    QCOMPARE(j.at("model").contains("hidden"), hidden);
    for (const char* k : {"preset", "layers", "heads", "dim", "context", "dropout", "pad_vocab"})
      QVERIFY2(!j.at("model").contains(k), k);
    QVERIFY(!j.contains("checkpoint"));
    QVERIFY(!j.at("train").contains("eval_windows"));
  }

 private slots:
  void charGptByFlag() {
    const Json j = train("flag", {"--model", "char-gpt", "--set", "model.preset=tiny"});
    QVERIFY(!j.is_null());
    verify_text_record(j);
    QCOMPARE(j.at("train").at("batch").get<int64_t>(), int64_t{32});
    QCOMPARE(j.at("optim").at("lr").get<double>(), 2e-3);
    QCOMPARE(j.at("run").at("name").get<std::string>(), std::string("char-gpt tiny"));
    // eval of its weights names the text it trained on.
    const auto r = run_cli({"eval", "--device", "cpu", "--weights", m_dir.filePath("flag/model.safetensors")}, 120000);
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY2(r.out.contains("\"data\":\"tinyshakespeare\""), qPrintable(r.out));
  }

  void charGptBySetOnTheFirstRunPreset() {
    const Json j = train("set", {"--config", preset("digits-first-run.json"), "--set", "model.name=char-gpt"});
    QVERIFY(!j.is_null());
    verify_text_record(j);
    QCOMPARE(j.at("train").at("batch").get<int64_t>(), int64_t{32});
    QCOMPARE(j.at("train").at("epochs").get<int64_t>(), int64_t{30});  // not the preset's 800
    QCOMPARE(j.at("train").at("eval_every").get<int64_t>(), int64_t{100});
    QCOMPARE(j.at("run").at("name").get<std::string>(), std::string("char-gpt tiny"));  // not "first run"
  }

  void charGptByPreset() {
    const Json j = train("preset", {"--config", preset("char-tiny.json")});
    QVERIFY(!j.is_null());
    verify_text_record(j);
  }

  void mlpKinds() {
    const Json mlp = train("mlp", {"--model", "mlp", "--set", "model.hidden=32"});
    QVERIFY(!mlp.is_null());
    verify_mlp_record(mlp, true);
    QCOMPARE(mlp.at("model").at("hidden"), Json::array({32}));
    // From the char-gpt preset back to the digits MLP: its own run and data.
    const Json digits = train("digits", {"--config", preset("char-tiny.json"), "--model", "digits-mlp"});
    QVERIFY(!digits.is_null());
    verify_mlp_record(digits, false);
    QCOMPARE(digits.at("train").at("batch").get<int64_t>(), int64_t{64});
    QCOMPARE(digits.at("optim").at("lr").get<double>(), 1e-3);
    QCOMPARE(digits.at("precision").at("dtype").get<std::string>(), std::string("fp32"));
  }

  void optimizerDefaultsUnlessTheRateIsGiven() {
    auto printed = [](const QStringList& extra) {
      const auto r = run_cli(QStringList{"train", "--print-config"} + extra, 30000);
      return r.code == 0 ? Json::parse(r.out.toStdString()) : Json();
    };
    const Json lion = printed({"--set", "optim.name=lion"});
    QVERIFY(!lion.is_null());
    QCOMPARE(lion.at("optim").at("lr").get<double>(), 1e-4);
    QCOMPARE(lion.at("optim").at("beta2").get<double>(), 0.99);
    const Json given = printed({"--optimizer", "lion", "--lr", "5e-4"});
    QVERIFY(!given.is_null());
    QCOMPARE(given.at("optim").at("lr").get<double>(), 5e-4);
    const Json ada = printed({"--set", "optim.name=adafactor"});
    QVERIFY(!ada.is_null());
    QVERIFY(ada.at("optim").at("relative_step").get<bool>());
  }
};

QTEST_GUILESS_MAIN(TestRunConfigRecords)
#include "test_run_config_records.moc"
