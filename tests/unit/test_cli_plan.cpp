// ctest-labels: unit;no-asan
// trainlab-cli plan as a user runs it (QProcess on the built binary): --help names every option;
// --json prints one object whose per_gpu member holds the bytes by category (hand-worked values);
// the table prints GB and GiB; --search lists fitting layouts fastest first; --check runs the lab's
// model here and prints the ledger's bytes beside the prediction; every option is range-checked
// (NaN, infinity, out of range, a TP that does not divide the heads ...) with an error line naming
// the option and what was expected, and a non-zero exit.
#include <QProcess>
#include <QtTest>

#include "plan/planner.h"
#include "cli_support.h"
#include "test_support.h"

using namespace trainlab;
using namespace trainlab::test;

namespace {

using Result = CliResult;

Result cli(const QStringList& args, int timeout_ms = 120000) { return run_cli(QStringList{"plan"} + args, timeout_ms); }


Json json_of(const Result& r) { return Json::parse(r.out.toStdString()); }

}  // namespace

class TestCliPlan : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;

 private slots:
  void help() {
    const Result r = cli({"--help"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    for (const char* opt : {"--params", "--layers", "--hidden", "--heads", "--seq", "--vocab", "--model", "--batch", "--gpus",
                            "--nodes", "--zero", "--tp", "--pp", "--micro-batches", "--precision", "--optimizer",
                            "--recompute", "--dropout", "--gpu-memory", "--search", "--json", "--check", "--mfu", "--schedule",
                            "--virtual-stages", "--print-schedule"})
      QVERIFY2(r.out.contains(opt), opt);
  }

  // gpt2's preset, micro-batch 8, bf16 AdamW, 8 GPUs, ZeRO 1: 85,942,272 parameters, so weights and
  // gradients 2 P = 171,884,544 bytes, the optimizer's 12 bytes a parameter over 8 ranks
  // 12 * ceil(P / 8) = 128,913,408; the activations the lab's CharGpt buffers.
  void jsonPerGpu() {
    const Result r = cli({"--model", "char-gpt-gpt2", "--batch", "8", "--gpus", "8", "--zero", "1", "--precision", "bf16", "--json"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json j = json_of(r);
    const Json& g = j.at("per_gpu");
    QCOMPARE(g.at("weights_bytes").get<int64_t>(), int64_t{171884544});
    QCOMPARE(g.at("gradients_bytes").get<int64_t>(), int64_t{171884544});
    QCOMPARE(g.at("optimizer_bytes").get<int64_t>(), int64_t{128913408});
    const int64_t acts = char_gpt_activation_bytes(CharGptConfig::preset("gpt2"), CheckpointPolicy::Off, 1, 8, 1024, 2, false) +
                         token_step_activation_bytes(8, 1024);
    QCOMPARE(g.at("activations_bytes").get<int64_t>(), acts);
    QCOMPARE(g.at("total_bytes").get<int64_t>(), int64_t{171884544} * 2 + 128913408 + acts);
    QCOMPARE(j.at("layout").at("dp").get<int64_t>(), int64_t{8});
    QVERIFY(j.at("fits").get<bool>());
    for (const char* k : {"step_s", "compute_s", "communication_s", "bubble_s", "bubble_fraction", "tokens_per_s"})
      QVERIFY2(j.at("time").contains(k), k);
    QCOMPARE(j.at("time").at("tokens").get<double>(), 65536.0);
  }

  // The lean optimizers on gpt2's preset, one GPU in bf16: the optimizer bytes are the fp32 masters
  // (4 P) plus plan/memory_model.h's optimizer_state_bytes over the preset's parameter shapes.
  void leanOptimizers_data() {
    QTest::addColumn<QString>("name");
    for (const char* n : {"adamw8bit", "adafactor", "lion"}) QTest::newRow(n) << n;
  }
  void leanOptimizers() {
    QFETCH(QString, name);
    const Result r = cli({"--model", "char-gpt-gpt2", "--batch", "8", "--precision", "bf16", "--optimizer", name, "--json"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json g = json_of(r).at("per_gpu");
    const PlanModel m = plan_model_preset("char-gpt-gpt2", "model");
    OptimizerOptions o;
    o.name = name.toStdString();
    const int64_t state = optimizer_state_bytes(o, m.param_shapes());
    QCOMPARE(g.at("optimizer_bytes").get<int64_t>(), 4 * m.total_params() + state);
    const double per_param = static_cast<double>(state) / static_cast<double>(m.total_params());
    if (name == "adamw8bit") QVERIFY(per_param > 2.0 && per_param < 2.01);
    if (name == "lion") QCOMPARE(per_param, 4.0);
    if (name == "adafactor") QVERIFY(per_param < 0.5);
  }

  // Korthikanti et al.'s count on GPT-3 175B's shape at b = 1 (docs/PLANNER.md's first example):
  // 96 layers of sbh (34 + 5 a s / h) = 2,868,903,936 bytes, the embedding's dropout mask sbh =
  // 25,165,824, the output layer 4 sbh + 4 s b V = 520,093,696: 275,960,037,376 bytes. A shape
  // defaults to the Megatron count and dropout 0.1.
  void megatronShape() {
    const Result r = cli({"--layers", "96", "--hidden", "12288", "--heads", "96", "--seq", "2048", "--vocab", "51200", "--json"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json j = json_of(r);
    QCOMPARE(j.at("activations").get<std::string>(), std::string("megatron"));
    QCOMPARE(j.at("per_gpu").at("activations_bytes").get<int64_t>(), int64_t{275960037376});
    QVERIFY(!j.at("fits").get<bool>());
  }

  void readableTable() {
    const Result r = cli({"--model", "char-gpt-gpt2", "--batch", "8", "--gpus", "8", "--zero", "1"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    for (const char* s : {"GB", "GiB", "weights", "gradients", "optimizer", "activations", "171,884,544", "0.172", "0.160",
                          "time per step", "fits"})
      QVERIFY2(r.out.contains(s), s);
    // A model by its parameter count says its activations are not predicted.
    const Result p = cli({"--params", "7e9", "--gpus", "8", "--zero", "3"});
    QVERIFY2(p.code == 0, qPrintable(describe(p)));
    QVERIFY2(p.out.contains("not predicted"), qPrintable(describe(p)));
    QVERIFY2(p.out.contains("7,000,000,000 parameters"), qPrintable(describe(p)));
  }

  void search() {
    const Result r = cli({"--model", "char-gpt-gpt2", "--batch", "4", "--gpus", "8", "--gpu-memory", "2", "--search", "--json"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json j = json_of(r);
    QCOMPARE(j.at("considered").get<int64_t>(), int64_t{78});
    const Json& ls = j.at("layouts");
    QVERIFY(!ls.empty());
    double last = 0;
    for (const Json& l : ls) {
      QVERIFY(l.at("fits").get<bool>());
      QVERIFY(l.at("per_gpu").at("total_bytes").get<double>() <= 2e9);
      QVERIFY(l.at("time").at("step_s").get<double>() >= last);
      last = l.at("time").at("step_s").get<double>();
    }
    const Result t = cli({"--model", "char-gpt-gpt2", "--batch", "4", "--gpus", "8", "--search", "--tp", "2", "--top", "3"});
    QVERIFY2(t.code == 0, qPrintable(describe(t)));
    QVERIFY2(t.out.contains("rank") && t.out.contains("GiB/GPU"), qPrintable(describe(t)));
    QCOMPARE(t.out.count(QRegularExpression("\n +[123] +\\d+ +2 ")), 3);  // three rows, TP 2 each
  }

  // The lab's tiny model here, one step: the ledger's bytes equal the prediction.
  void check() {
    const Result r = cli({"--model", "char-gpt-tiny", "--batch", "4", "--precision", "bf16", "--recompute", "selective",
                          "--check", "--device", "cpu", "--out", m_tmp.filePath("tiny"), "--json"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    const Json c = json_of(r).at("check");
    for (const char* k : {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes"}) {
      const double p = c.at("predicted").at(k).get<double>(), m = c.at("measured").at(k).get<double>();
      QVERIFY2(p > 0 && std::fabs(m - p) <= 0.02 * p, k);
    }
    const Result t = cli({"--model", "digits-mlp", "--batch", "32", "--check", "--device", "cpu"});
    QVERIFY2(t.code == 0, qPrintable(describe(t)));
    QVERIFY2(t.out.contains("predicted bytes") && t.out.contains("measured bytes"), qPrintable(describe(t)));
    // A layout the lab cannot run on one device says why.
    const Result u = cli({"--model", "char-gpt-tiny", "--gpus", "2", "--check", "--device", "cpu"});
    QVERIFY2(u.code == 1, qPrintable(describe(u)));
    QVERIFY2(u.err.contains("DP, TP and PP must be 1"), qPrintable(describe(u)));
  }

  // Pipeline schedules (dist/pipeline_schedule.h): the textbook's 4 stages and 8 micro-batches
  // idle 3/11 under 1f1b and gpipe, 1/9 under zb-h1 (F = B = W); interleaved with 2 chunks
  // (p - 1)/(v m + p - 1) = 3/19; GPipe holds all 8 micro-batches; the JSON names the schedule.
  void schedules() {
    const QStringList pipe{"--layers", "8", "--hidden", "64", "--heads", "4", "--seq", "16", "--vocab", "100",
                           "--gpus", "4", "--pp", "4", "--micro-batches", "8", "--json"};
    const struct {
      QStringList extra;
      double bubble;
      int64_t first_in_flight;
    } cases[] = {{{}, 3.0 / 11.0, 4},
                 {{"--schedule", "1f1b"}, 3.0 / 11.0, 4},
                 {{"--schedule", "gpipe"}, 3.0 / 11.0, 8},
                 {{"--schedule", "zb-h1"}, 3.0 / 27.0, 4},
                 {{"--schedule", "interleaved", "--virtual-stages", "2"}, 3.0 / 19.0, 6}};
    for (const auto& c : cases) {
      const Result r = cli(pipe + c.extra);
      QVERIFY2(r.code == 0, qPrintable(describe(r)));
      const Json j = json_of(r);
      QCOMPARE(j.at("time").at("bubble_fraction").get<double>(), c.bubble);
      QCOMPARE(j.at("stages").at(0).at("in_flight").get<int64_t>(), c.first_in_flight);
      QCOMPARE(j.at("layout").at("virtual_stages").get<int64_t>(), c.extra.contains("interleaved") ? int64_t{2} : int64_t{1});
      QCOMPARE(QString::fromStdString(j.at("layout").at("schedule").get<std::string>()),
               c.extra.isEmpty() ? QString("1f1b") : c.extra[1]);
    }
  }

  // --print-schedule: the table a learner reads, 2 stages and 4 micro-batches under 1F1B.
  void printSchedule() {
    const Result r = cli({"--layers", "4", "--hidden", "64", "--heads", "4", "--seq", "16", "--vocab", "100", "--gpus", "2",
                          "--pp", "2", "--micro-batches", "4", "--schedule", "1f1b", "--print-schedule"});
    QVERIFY2(r.code == 0, qPrintable(describe(r)));
    QVERIFY2(r.out.contains("pipeline       1f1b schedule, 2 stages x 4 micro-batches: bubble 0.2 "), qPrintable(describe(r)));
    const QString table =
        "1f1b: 2 stages, 4 micro-batches; F forward, B backward (input and weight gradients, 2 slots), . idle\n"
        "stage 0 | F0 F1 .  .  B0 B0 F2 B1 B1 F3 B2 B2 .  B3 B3\n"
        "stage 1 | .  F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3 .  . \n"
        "idle fraction 0.2 (15 slots)\n";
    QVERIFY2(r.out.endsWith(table), qPrintable(describe(r)));
  }

  // Bad values: exit 1 (or CLI11's usage code), no crash, one error naming the option and the
  // expected range or names.
  void badOptions_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("mentions");
    const QStringList gpt2{"--model", "char-gpt-gpt2"};
    QTest::newRow("mfu nan") << gpt2 + QStringList{"--mfu", "nan"} << "--mfu: expected a number in (0, 1], got nan";
    QTest::newRow("mfu inf") << gpt2 + QStringList{"--mfu", "inf"} << "--mfu: expected a number in (0, 1], got inf";
    QTest::newRow("mfu 1.5") << gpt2 + QStringList{"--mfu", "1.5"} << "--mfu: expected a number in (0, 1], got 1.5";
    QTest::newRow("gpu memory negative") << gpt2 + QStringList{"--gpu-memory", "-1"} << "--gpu-memory: expected a number in (0, 1e6], got -1";
    QTest::newRow("gpu memory nan") << gpt2 + QStringList{"--gpu-memory", "nan"} << "--gpu-memory: expected a number in (0, 1e6], got nan";
    QTest::newRow("nvlink zero") << gpt2 + QStringList{"--nvlink-gbs", "0"} << "--nvlink-gbs: expected a number in (0, 1e6], got 0";
    QTest::newRow("network inf") << gpt2 + QStringList{"--network-gbs", "inf"} << "--network-gbs: expected a number in (0, 1e6], got inf";
    QTest::newRow("tp heads") << gpt2 + QStringList{"--gpus", "10", "--tp", "5"} << "--tp 5 must divide --heads 12";
    QTest::newRow("pp layers") << gpt2 + QStringList{"--gpus", "10", "--pp", "5"} << "--pp 5 must divide --layers 12";
    QTest::newRow("tp gpus") << gpt2 + QStringList{"--gpus", "8", "--tp", "3"} << "must divide --gpus 8";
    QTest::newRow("tp too big") << gpt2 + QStringList{"--gpus", "2", "--tp", "4"} << "--tp 4: expected an integer in [1, 2]";
    QTest::newRow("tp not integer") << gpt2 + QStringList{"--tp", "1.5"} << "--tp";
    QTest::newRow("zero 4") << gpt2 + QStringList{"--gpus", "2", "--zero", "4"} << "--zero: expected an integer in [0, 3], got 4";
    QTest::newRow("zero one rank") << gpt2 + QStringList{"--zero", "1"} << "needs DP >= 2";
    QTest::newRow("batch 0") << gpt2 + QStringList{"--batch", "0"} << "--batch: expected an integer in [1, 1048576], got 0";
    QTest::newRow("gpus 0") << gpt2 + QStringList{"--gpus", "0"} << "--gpus: expected an integer in [1, 1048576], got 0";
    QTest::newRow("nodes uneven") << gpt2 + QStringList{"--gpus", "8", "--nodes", "3"} << "--gpus 8 must be a multiple of --nodes 3";
    QTest::newRow("micro-batches 0") << gpt2 + QStringList{"--micro-batches", "0"} << "--micro-batches: expected an integer in [1, 1048576], got 0";
    QTest::newRow("dropout 1") << gpt2 + QStringList{"--dropout", "1"} << "--dropout: expected a number in [0, 1), got 1";
    QTest::newRow("dropout nan") << gpt2 + QStringList{"--dropout", "nan"} << "--dropout: expected a number in [0, 1), got nan";
    QTest::newRow("precision") << gpt2 + QStringList{"--precision", "fp64"} << "--precision 'fp64': expected one of fp32, tf32, bf16, fp16, fp8";
    QTest::newRow("fp8 on a100") << gpt2 + QStringList{"--precision", "fp8", "--gpu", "a100"} << "--precision fp8: the a100 has no peak";
    QTest::newRow("optimizer") << gpt2 + QStringList{"--optimizer", "adam"}
                               << "--optimizer 'adam': expected adamw, sgd, adamw8bit, adafactor or lion";
    QTest::newRow("recompute") << gpt2 + QStringList{"--recompute", "some"} << "--recompute 'some': expected none, selective or full";
    QTest::newRow("recompute every") << gpt2 + QStringList{"--recompute", "full", "--recompute-every", "13"}
                                     << "--recompute-every 13: expected an integer in [1, 12]";
    QTest::newRow("gpu") << gpt2 + QStringList{"--gpu", "v100"} << "--gpu 'v100': expected one of h100, h200, a100";
    QTest::newRow("activations") << gpt2 + QStringList{"--activations", "paper"} << "--activations 'paper': expected lab";
    QTest::newRow("model") << QStringList{"--model", "gpt5"} << "--model 'gpt5': expected one of digits-mlp, char-gpt-tiny";
    QTest::newRow("no model") << QStringList{"--gpus", "8"} << "give a model";
    QTest::newRow("partial shape") << QStringList{"--layers", "2", "--hidden", "64"} << "needs --heads too";
    QTest::newRow("heads hidden") << QStringList{"--layers", "2", "--hidden", "64", "--heads", "5", "--seq", "8", "--vocab", "10"}
                                  << "--heads 5 must divide --hidden 64";
    QTest::newRow("seq 0") << QStringList{"--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "0", "--vocab", "10"}
                           << "--seq: expected an integer in [1, 16777216], got 0";
    QTest::newRow("vocab 1") << QStringList{"--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "8", "--vocab", "1"}
                             << "--vocab: expected an integer in [2, 16777216], got 1";
    QTest::newRow("layers negative") << QStringList{"--layers", "-3", "--hidden", "64", "--heads", "4", "--seq", "8", "--vocab", "10"}
                                     << "--layers: expected an integer in [1, 1048576], got -3";
    QTest::newRow("params huge") << QStringList{"--params", "1e20"} << "--params";
    QTest::newRow("params nan") << QStringList{"--params", "nan"} << "--params: expected an integer in [1, 1e15], got nan";
    QTest::newRow("params fraction") << QStringList{"--params", "2.5"} << "--params: expected an integer in [1, 1e15], got 2.5";
    QTest::newRow("params and shape") << QStringList{"--params", "1000", "--layers", "2"} << "not with --layers";
    QTest::newRow("mlp recompute") << QStringList{"--model", "digits-mlp", "--recompute", "full"} << "applies to transformers";
    QTest::newRow("mlp tp") << QStringList{"--model", "digits-mlp", "--gpus", "2", "--tp", "2"} << "split a transformer's layers";
    QTest::newRow("mlp dropout") << QStringList{"--model", "digits-mlp", "--dropout", "0.1"} << "--dropout applies to transformers";
    QTest::newRow("top without search") << gpt2 + QStringList{"--top", "3"} << "--top applies to --search";
    QTest::newRow("global batch 0") << gpt2 + QStringList{"--search", "--global-batch", "0"} << "--global-batch: expected an integer in [1, 1e12], got 0";
    QTest::newRow("steps without check") << gpt2 + QStringList{"--steps", "3"} << "--steps applies to --check";
    const QStringList pipe{"--layers", "4", "--hidden", "64", "--heads", "4", "--seq", "16", "--vocab", "100", "--gpus", "4", "--pp", "4"};
    QTest::newRow("schedule") << pipe + QStringList{"--schedule", "pipedream"}
                              << "--schedule 'pipedream': expected gpipe, 1f1b, interleaved or zb-h1";
    QTest::newRow("interleaved micro-batches") << pipe + QStringList{"--schedule", "interleaved", "--micro-batches", "6"}
                                               << "--micro-batches 6 must be a multiple of it";
    QTest::newRow("virtual stages 1f1b") << pipe + QStringList{"--virtual-stages", "2"} << "expected 1 with --schedule 1f1b";
    QTest::newRow("virtual stages layers") << pipe + QStringList{"--schedule", "interleaved", "--virtual-stages", "2", "--micro-batches", "4"}
                                           << "--pp 4 x --virtual-stages 2 must divide --layers 4";
    QTest::newRow("virtual stages 0") << pipe + QStringList{"--virtual-stages", "0"} << "--virtual-stages: expected an integer";
    QTest::newRow("print schedule json") << pipe + QStringList{"--print-schedule", "--json"} << "not with --search, --json or --check";
    QTest::newRow("too large") << QStringList{"--model", "char-gpt-gpt2", "--seq", "16777216", "--batch", "1048576"} << "too large to plan";
  }
  void badOptions() {
    QFETCH(QStringList, args);
    QFETCH(QString, mentions);
    const Result r = cli(args);
    QVERIFY2(r.code > 0, qPrintable(describe(r)));
    QVERIFY2(r.err.contains(mentions), qPrintable(mentions + " not in: " + describe(r)));
    QVERIFY2(r.out.isEmpty(), qPrintable(describe(r)));
  }
};

QTEST_APPLESS_MAIN(TestCliPlan)
#include "test_cli_plan.moc"
