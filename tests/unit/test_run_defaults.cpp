// The defaults a switched model or optimizer brings (config/run_defaults.h), and what a run's
// record keeps: the first-run preset switched to char-gpt runs char-gpt's own length, batch, rate
// and evaluation interval under a new name, keeping the keys the user chose; Lion gets a tenth of
// AdamW's rate, its betas and decay, and then trains the digits MLP as well as AdamW does; the
// resolved config and the record hold the data set that runs and the model's own keys only.
#include <QtTest>

#include "config/run_defaults.h"
#include "train/trainer.h"
#include "util/error.h"

using namespace trainlab;

namespace {

Config first_run_preset() {
  return Config::from_file(std::string(TRAINLAB_SOURCE_DIR) + "/resources/presets/digits-first-run.json");
}

}  // namespace

class TestRunDefaults : public QObject {
  Q_OBJECT
 private slots:
  void charGptFromTheFirstRunPresetGetsItsOwnRun() {
    const Config before = first_run_preset();
    Config c = before;
    c.set("model.name", "char-gpt");
    const std::vector<std::string> changed = apply_switch_defaults(c, before, {"model.name"});
    QCOMPARE(c.get_int("train.steps"), int64_t{1200});
    QCOMPARE(c.get_int("train.epochs"), int64_t{30});
    QCOMPARE(c.get_int("train.batch"), int64_t{32});
    QCOMPARE(c.get_int("train.eval_every"), int64_t{100});
    QCOMPARE(c.get_float("optim.lr"), 2e-3);
    QCOMPARE(c.get_string("data.name"), std::string("tinyshakespeare"));
    QCOMPARE(c.get_string("run.name"), std::string("char-gpt tiny"));
    QVERIFY(std::find(changed.begin(), changed.end(), "train.steps") != changed.end());
    // Another preset is another run.
    const Config tiny = c;
    c.set("model.preset", "small");
    apply_switch_defaults(c, tiny, {"model.name", "model.preset"});
    QCOMPARE(c.get_int("train.steps"), int64_t{5000});
    QCOMPARE(c.get_int("train.batch"), int64_t{64});
    QCOMPARE(c.get_string("run.name"), std::string("char-gpt small"));
    // Back to the MLP: its run on the digits.
    const Config small = c;
    c.set("model.name", "digits-mlp");
    apply_switch_defaults(c, small, {"model.name"});
    QCOMPARE(c.get_int("train.steps"), int64_t{0});
    QCOMPARE(c.get_int("train.epochs"), int64_t{30});
    QCOMPARE(c.get_int("train.batch"), int64_t{64});
    QCOMPARE(c.get_string("data.name"), std::string("digits"));
  }

  void theUsersOwnKeysAreKept() {
    const Config before = first_run_preset();
    Config c = before;
    c.set("model.name", "char-gpt");
    c.set("train.batch", "8");
    apply_switch_defaults(c, before, {"model.name", "train.batch", "run.name"});
    QCOMPARE(c.get_int("train.batch"), int64_t{8});
    QCOMPARE(c.get_string("run.name"), std::string("first run"));  // chosen: kept
    QCOMPARE(c.get_int("train.steps"), int64_t{1200});
    // No switch, no change: a config file's own values stay.
    Config same = before;
    QVERIFY(apply_switch_defaults(same, before, {}).empty());
    QCOMPARE(same.get_int("train.epochs"), int64_t{800});
  }

  void lionGetsItsRateBetasAndDecay() {
    const Config before;  // AdamW at 1e-3, weight decay 0.01
    Config c = before;
    c.set("optim.name", "lion");
    apply_switch_defaults(c, before, {"optim.name"});
    QCOMPARE(c.get_float("optim.lr"), 1e-4);
    QCOMPARE(c.get_float("optim.beta1"), 0.9);
    QCOMPARE(c.get_float("optim.beta2"), 0.99);
    QCOMPARE(c.get_float("optim.weight_decay"), 0.1);
    // Back to AdamW: its own again (the AdamW-equivalent rate is kept).
    const Config lion = c;
    c.set("optim.name", "adamw");
    apply_switch_defaults(c, lion, {"optim.name"});
    QCOMPARE(c.get_float("optim.lr"), 1e-3);
    QCOMPARE(c.get_float("optim.beta2"), 0.999);
    QCOMPARE(c.get_float("optim.weight_decay"), 0.01);
    // A rate the user gave stays.
    Config given = before;
    given.set("optim.name", "lion");
    given.set("optim.lr", "3e-4");
    apply_switch_defaults(given, before, {"optim.name", "optim.lr"});
    QCOMPARE(given.get_float("optim.lr"), 3e-4);
    QCOMPARE(given.get_float("optim.beta2"), 0.99);
  }

  void otherOptimizersGetTheirCustomarySettings() {
    const Config before;
    Config a = before;
    a.set("optim.name", "adafactor");
    apply_switch_defaults(a, before, {"optim.name"});
    QVERIFY(a.get_bool("optim.relative_step"));
    Config s = before;
    s.set("optim.name", "sgd");
    apply_switch_defaults(s, before, {"optim.name"});
    QCOMPARE(s.get_float("optim.lr"), 0.05);
    QCOMPARE(s.get_float("optim.weight_decay"), 2e-4);  // lr x wd as AdamW's
    // A model switched under Lion takes the model's rate scaled for Lion.
    Config l = before;
    l.set("optim.name", "lion");
    apply_switch_defaults(l, before, {"optim.name"});
    const Config lion = l;
    l.set("model.name", "char-gpt");
    apply_switch_defaults(l, lion, {"optim.name", "model.name"});
    QCOMPARE(l.get_float("optim.lr"), 2e-4);
  }

  void theRecordHoldsWhatRuns() {
    Config c;
    c.set("model.name", "char-gpt");  // data.name stays the schema's "digits"
    const Config r = resolved_config(c);
    QCOMPARE(r.get_string("data.name"), std::string("tinyshakespeare"));
    const Json rec = recorded_config(c);
    QCOMPARE(rec.at("data").at("name").get<std::string>(), std::string("tinyshakespeare"));
    QVERIFY(!rec.at("model").contains("hidden"));
    QVERIFY(!rec.at("model").contains("activation"));
    QVERIFY(!rec.at("data").contains("test_fraction"));
    QVERIFY(rec.at("model").contains("preset"));
    QVERIFY(rec.contains("checkpoint"));
    // Read back, it is the resolved config.
    QVERIFY(Config::differences(Config::from_record(rec), r).empty());
    // The MLPs: none of the transformer's keys; digits-mlp has no hidden sizes of its own.
    Config m;
    m.set("model.name", "mlp");
    const Json mrec = recorded_config(m);
    QVERIFY(mrec.at("model").contains("hidden"));
    for (const char* k : {"preset", "layers", "heads", "dim", "context", "dropout", "pad_vocab"})
      QVERIFY2(!mrec.at("model").contains(k), k);
    QVERIFY(!mrec.contains("checkpoint"));
    QVERIFY(!mrec.at("data").contains("val_fraction"));
    QVERIFY(!recorded_config(Config()).at("model").contains("hidden"));
    // A data set char-gpt cannot read stays named, so that the start says so.
    Config bad;
    bad.set("model.name", "char-gpt");
    bad.set("data.name", "fashion-mnist");
    QCOMPARE(resolved_config(bad).get_string("data.name"), std::string("fashion-mnist"));
  }

  // The measure: Lion with AdamW's rate ended at 94.2 % on the digits; switched with its
  // own defaults it reaches AdamW's accuracy in the same 30 epochs.
  void lionSwitchedTrainsTheDigitsWell() {
    const Config before;
    Config c = before;
    c.set("optim.name", "lion");
    apply_switch_defaults(c, before, {"optim.name"});
    c.set("device.name", "cpu");
    c.set("device.calibration", "off");
    c.set("run.save_weights", "false");
    QTemporaryDir dir;
    c.set_json("run.out", dir.filePath("lion").toStdString());
    Trainer t(c);
    const RunSummary s = t.run();
    QCOMPARE(QString::fromStdString(s.status), QString("completed"));
    QVERIFY2(s.test_accuracy >= 0.965, qPrintable(QString::number(s.test_accuracy)));
  }
};

QTEST_GUILESS_MAIN(TestRunDefaults)
#include "test_run_defaults.moc"
