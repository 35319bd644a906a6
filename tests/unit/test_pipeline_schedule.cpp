// ctest-labels: unit
// Pipeline schedules as data (dist/pipeline_schedule.h): for p in {2, 4} and m in {4, 8, 16},
// every stage's list holds each (micro-batch, chunk)'s forward and backward (or B and W) once, the
// simulation finishes (no deadlock), the idle fractions are the closed forms exactly (GPipe and
// 1F1B (p-1)/(m+p-1) with backward 2x forward; interleaved (p-1)/(v m+p-1) with a chunk's costs
// 1/v of the stage's; ZB-H1 below 1F1B), the peak in-flight activations, the weight-gradient order
// (ascending micro-batch on every stage and chunk), the sends and receives, the text table, and
// errors for bad input; the stages' blocks (dist.stage_layers, balanced by default) and a run's
// pipeline layout checks (dist.pp, dist.schedule, dist.virtual_stages, train.micro_batches as the
// synonym of train.accumulate), each bad value a clear error naming it, m < p a warning, and
// trainlab-cli train refusing dist.pp above the layers.
#include <QtTest>

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "cli_support.h"
#include "config/dist_options.h"
#include "config/train_options.h"
#include "dist/pipeline_schedule.h"
#include "train/distributed.h"
#include "util/error.h"

using namespace trainlab;
using namespace trainlab::dist;
using namespace trainlab::test;

namespace {

const PipelineSchedule kAll[] = {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB, PipelineSchedule::Interleaved,
                                 PipelineSchedule::ZbH1};

int chunks_of(PipelineSchedule k) { return k == PipelineSchedule::Interleaved ? 2 : 1; }

// The default costs (F = B = W = 1 a stage, so backward is 2x forward), a chunk's share for v > 1.
PipelineCosts costs_of(int v) { return chunk_costs(PipelineCosts{}, v); }

bool throws_with(const std::function<void()>& f, const QString& text) {
  try {
    f();
  } catch (const Error& e) {
    if (QString::fromStdString(e.what()).contains(text)) return true;
    qWarning("message: %s", e.what());
    return false;
  }
  return false;
}

}  // namespace

class TestPipelineSchedule : public QObject {
  Q_OBJECT

 private slots:
  void names() {
    for (PipelineSchedule k : kAll) QCOMPARE(pipeline_schedule_from_name(pipeline_schedule_name(k), "--schedule"), k);
    QCOMPARE(QString(pipeline_schedule_name(PipelineSchedule::OneFOneB)), QString("1f1b"));
    QCOMPARE(QString(pipeline_schedule_name(PipelineSchedule::ZbH1)), QString("zb-h1"));
    QVERIFY(throws_with([] { pipeline_schedule_from_name("pipedream", "--schedule"); },
                        "--schedule 'pipedream': expected gpipe, 1f1b, interleaved or zb-h1"));
  }

  // Each (micro-batch, chunk) appears once as a forward and once as a backward (zb-h1: once as B
  // and once as W) on every stage, and nothing else appears.
  void everyActionOnce() {
    for (PipelineSchedule k : kAll)
      for (int p : {2, 4})
        for (int m : {4, 8, 16}) {
          const int v = chunks_of(k);
          const PipelineTable t = build_schedule(k, p, m, v);
          QCOMPARE(int(t.actions.size()), p);
          for (int s = 0; s < p; ++s) {
            std::map<std::pair<int, int>, int> f, b, w;
            for (const PipeAction& a : t.actions[size_t(s)]) {
              QCOMPARE(a.stage, s);
              const auto key = std::make_pair(a.micro_batch, a.chunk);
              if (a.op == PipeOp::Forward) ++f[key];
              if (a.op == PipeOp::Backward || a.op == PipeOp::BackwardInput) ++b[key];
              if (a.op == PipeOp::BackwardWeight) ++w[key];
              if (a.op != PipeOp::Forward)
                QCOMPARE(a.op == PipeOp::BackwardInput || a.op == PipeOp::BackwardWeight, k == PipelineSchedule::ZbH1);
            }
            QCOMPARE(int(f.size()), m * v);
            QCOMPARE(int(b.size()), m * v);
            QCOMPARE(int(w.size()), k == PipelineSchedule::ZbH1 ? m : 0);
            for (const auto& [key, n] : f) QCOMPARE(n, 1);
            for (const auto& [key, n] : b) QCOMPARE(n, 1);
            for (const auto& [key, n] : w) QCOMPARE(n, 1);
          }
          const PipelineTiming r = simulate(t, costs_of(v));  // throws on a deadlock
          for (int s = 0; s < p; ++s) QCOMPARE(r.stages[size_t(s)].size(), t.actions[size_t(s)].size());
        }
  }

  // Idle fractions with F = 1, B + W = 2 (a stage's; a chunk's 1/v). Every quantity is a sum of
  // halves, exact in binary, and IEEE division rounds correctly, so equal ratios compare equal.
  void idleFractions() {
    for (int p : {2, 4})
      for (int m : {4, 8, 16}) {
        const double pd = p, md = m;
        const double one = simulate(build_schedule(PipelineSchedule::OneFOneB, p, m)).idle_fraction;
        QCOMPARE(one, (pd - 1) / (md + pd - 1));
        QCOMPARE(simulate(build_schedule(PipelineSchedule::GPipe, p, m)).idle_fraction, (pd - 1) / (md + pd - 1));
        // Megatron's interleaved bubble: a chunk costs 1/v of the stage, so the work is unchanged and
        // the ramp (p - 1)(F + B) shrinks by v.
        const double inter = simulate(build_schedule(PipelineSchedule::Interleaved, p, m, 2), costs_of(2)).idle_fraction;
        QCOMPARE(inter, (pd - 1) / (2 * md + pd - 1));
        const PipelineTiming zb = simulate(build_schedule(PipelineSchedule::ZbH1, p, m));
        QVERIFY(zb.idle_fraction < one);
        QCOMPARE(zb.makespan, 3 * md + pd - 1);  // (p - 1)(F + B - W) idle a stage
        for (PipelineSchedule k : kAll)
          QCOMPARE(simulate(build_schedule(k, p, m, chunks_of(k)), costs_of(chunks_of(k))).idle_fraction,
                   pipeline_bubble(k, p, m, chunks_of(k)).fraction());
      }
    // The textbook's example: 4 stages, 8 micro-batches: 3/11 idle, 9 slots a stage of 33.
    for (PipelineSchedule k : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
      const PipelineTiming r = simulate(build_schedule(k, 4, 8));
      QCOMPARE(r.idle_fraction, 3.0 / 11.0);
      QCOMPARE(r.makespan, 33.0);
      for (double idle : r.idle) QCOMPARE(idle, 9.0);
    }
  }

  // Backward 2x forward is what makes GPipe's formula exact; a p2p time adds to each hop.
  void otherCosts() {
    const PipelineTiming r = simulate(build_schedule(PipelineSchedule::GPipe, 2, 4), {1.0, 1.0, 1.0, 0.5});
    // Forward wave: stage 1 starts F0 at 1.5, ends F3 at 5.5; backward 0 at 5.5 on stage 1, then
    // 4 backwards of 2 on stage 0 from 8 (7.5 + 0.5): 16.
    QCOMPARE(r.makespan, 16.0);
  }

  void peakInFlight() {
    for (int p : {2, 4})
      for (int m : {4, 8, 16}) {
        const PipelineTiming one = simulate(build_schedule(PipelineSchedule::OneFOneB, p, m));
        const PipelineTiming zb = simulate(build_schedule(PipelineSchedule::ZbH1, p, m));
        const PipelineTiming gp = simulate(build_schedule(PipelineSchedule::GPipe, p, m));
        const PipelineTiming in = simulate(build_schedule(PipelineSchedule::Interleaved, p, m, 2), costs_of(2));
        for (int s = 0; s < p; ++s) {
          QCOMPARE(one.peak_in_flight[size_t(s)], int64_t(std::min(p - s, m)));
          QCOMPARE(zb.peak_in_flight[size_t(s)], int64_t(std::min(p - s, m)));
          QCOMPARE(gp.peak_in_flight[size_t(s)], int64_t(m));
          for (PipelineSchedule k : kAll) {
            const PipelineTiming& r = k == PipelineSchedule::GPipe      ? gp
                                      : k == PipelineSchedule::OneFOneB ? one
                                      : k == PipelineSchedule::ZbH1     ? zb
                                                                        : in;
            QCOMPARE(r.peak_in_flight[size_t(s)], pipeline_peak_in_flight(k, p, m, chunks_of(k), s));
          }
        }
      }
  }

  // The gradients must add up in micro-batch order on every stage and chunk, whatever the
  // schedule, for losses bit-identical to one rank's gradient accumulation.
  void weightGradientOrder() {
    for (PipelineSchedule k : kAll)
      for (int p : {2, 4})
        for (int m : {4, 8, 16}) {
          const PipelineTable t = build_schedule(k, p, m, chunks_of(k));
          for (int s = 0; s < p; ++s)
            for (int c = 0; c < t.chunks; ++c) {
              const std::vector<int> order = weight_gradient_order(t, s, c);
              QCOMPARE(int(order.size()), m);
              for (int i = 0; i < m; ++i) QCOMPARE(order[size_t(i)], i);
            }
        }
  }

  // Sends and receives follow the virtual stages: chunk 0 of the last rank feeds chunk 1 of rank 0.
  void sendsAndReceives() {
    const PipelineTable t = build_schedule(PipelineSchedule::Interleaved, 2, 4, 2);
    QCOMPARE(t.sends_to({1, PipeOp::Forward, 0, 0}), 0);  // virtual stage 1 -> 2 (rank 0, chunk 1)
    QCOMPARE(t.sends_to({1, PipeOp::Forward, 0, 1}), -1);  // the last virtual stage
    QCOMPARE(t.receives_from({0, PipeOp::Forward, 0, 0}), -1);
    QCOMPARE(t.receives_from({0, PipeOp::Backward, 0, 1}), 1);
    QCOMPARE(t.sends_to({0, PipeOp::Backward, 0, 1}), 1);
    QCOMPARE(t.sends_to({0, PipeOp::Backward, 0, 0}), -1);
    QCOMPARE(t.sends_to({0, PipeOp::BackwardWeight, 0, 0}), -1);
  }

  void badInput() {
    QVERIFY(throws_with([] { build_schedule(PipelineSchedule::OneFOneB, 0, 4); }, "pipeline stages 0"));
    QVERIFY(throws_with([] { build_schedule(PipelineSchedule::OneFOneB, 2, 0); }, "micro-batches 0"));
    QVERIFY(throws_with([] { build_schedule(PipelineSchedule::Interleaved, 2, 4, 0); }, "virtual stages 0"));
    QVERIFY(throws_with([] { build_schedule(PipelineSchedule::OneFOneB, 2, 4, 2); }, "virtual stages 2: only the interleaved"));
    QVERIFY(throws_with([] { build_schedule(PipelineSchedule::Interleaved, 4, 6, 2); },
                        "micro-batches 6 must be a multiple of pipeline stages 4"));
    // m < p under 1f1b works, with a warning.
    QVERIFY(QString::fromStdString(pipeline_warning(PipelineSchedule::OneFOneB, 4, 2, 1)).startsWith("the bubble grows: "));
    QVERIFY(pipeline_warning(PipelineSchedule::OneFOneB, 4, 4, 1).empty());
    const PipelineTiming r = simulate(build_schedule(PipelineSchedule::OneFOneB, 4, 2));
    QCOMPARE(r.idle_fraction, 3.0 / 5.0);
    // A malformed list: stage 0 lists a backward twice and its forward 1 never.
    PipelineTable t = build_schedule(PipelineSchedule::GPipe, 1, 2);
    t.actions[0] = {{0, PipeOp::Forward, 0, 0}, {0, PipeOp::Backward, 0, 0}, {0, PipeOp::Backward, 0, 0}};
    QVERIFY(throws_with([&] { simulate(t); }, "twice"));
    // A deadlock: stage 0 waits for stage 1's backward before its own forward reaches stage 1.
    PipelineTable d = build_schedule(PipelineSchedule::OneFOneB, 2, 1);
    d.actions[0] = {{0, PipeOp::Backward, 0, 0}, {0, PipeOp::Forward, 0, 0}};
    QVERIFY(throws_with([&] { simulate(d); }, "deadlocks: stage 0 waits forever at B of micro-batch 0"));
  }

  // The blocks of each stage: balanced by default (the first stages one more), or as listed.
  void stageLayers() {
    using V = std::vector<int64_t>;
    QCOMPARE(stage_layer_split(PipelineSchedule::OneFOneB, 6, 2, 1, {}), (V{3, 3}));
    QCOMPARE(stage_layer_split(PipelineSchedule::GPipe, 7, 3, 1, {}), (V{3, 2, 2}));
    QCOMPARE(stage_layer_split(PipelineSchedule::Interleaved, 8, 2, 2, {}), (V{2, 2, 2, 2}));
    QCOMPARE(stage_layer_split(PipelineSchedule::OneFOneB, 4, 2, 1, {3, 1}), (V{3, 1}));
    QVERIFY(throws_with([] { stage_layer_split(PipelineSchedule::OneFOneB, 2, 4, 1, {}); },
                        "dist.pp 4 is more than model.layers 2"));
    QVERIFY(throws_with([] { stage_layer_split(PipelineSchedule::OneFOneB, 4, 2, 1, {1, 2}); },
                        "dist.stage_layers [1, 2] sums to 3 blocks, but model.layers 4"));
    QVERIFY(throws_with([] { stage_layer_split(PipelineSchedule::OneFOneB, 4, 2, 1, {1, 1, 2}); },
                        "dist.stage_layers [1, 1, 2] has 3 entries for dist.pp 2: expected 2"));
    QVERIFY(throws_with([] { stage_layer_split(PipelineSchedule::OneFOneB, 4, 2, 1, {4, 0}); },
                        "dist.stage_layers [4, 0]: stage 1 has no blocks"));
    QVERIFY(throws_with([] { stage_layer_split(PipelineSchedule::Interleaved, 6, 2, 2, {}); },
                        "dist.pp 2 x dist.virtual_stages 2 = 4 equal chunks, but model.layers 6 is not a multiple of 4"));
  }

  // A run's layout: each bad value an error naming the keys and values, m < p a warning.
  void layoutChecks() {
    auto config = [](const std::vector<std::pair<const char*, const char*>>& sets) {
      Config c;
      c.set("model.name", "char-gpt");
      c.set("model.layers", "4");
      for (const auto& [k, v] : sets) c.set(k, v);
      return c;
    };
    auto check = [&](const std::vector<std::pair<const char*, const char*>>& sets, int ranks) {
      const Config c = config(sets);
      return check_pipeline_layout(c, dist_options(c), ranks);
    };
    QCOMPARE(check({{"dist.pp", "2"}, {"train.micro_batches", "4"}}, 2), std::string());
    QCOMPARE(check({{"dist.pp", "2"}, {"dist.schedule", "interleaved"}, {"dist.virtual_stages", "2"},
                    {"train.micro_batches", "4"}}, 4), std::string());
    QVERIFY(throws_with([&] { check({{"dist.pp", "8"}}, 8); }, "dist.pp 8 is more than model.layers 4"));
    QVERIFY(throws_with([&] { check({{"dist.pp", "2"}, {"dist.stage_layers", "2,1"}}, 2); },
                        "dist.stage_layers [2, 1] sums to 3 blocks, but model.layers 4"));
    QVERIFY(throws_with([&] { check({{"dist.pp", "2"}, {"dist.schedule", "interleaved"}, {"dist.virtual_stages", "3"},
                                     {"train.micro_batches", "4"}}, 2); },
                        "model.layers 4 is not a multiple of 6"));
    QVERIFY(throws_with([&] { check({{"dist.pp", "2"}, {"dist.schedule", "interleaved"}, {"dist.virtual_stages", "2"},
                                     {"train.micro_batches", "3"}}, 2); },
                        "train.micro_batches 3 must be a multiple of dist.pp 2"));
    QVERIFY(throws_with([&] { check({{"dist.pp", "2"}, {"dist.virtual_stages", "2"}}, 2); },
                        "dist.virtual_stages 2: only dist.schedule interleaved"));
    QVERIFY(throws_with([&] { check({{"dist.pp", "2"}, {"model.name", "digits-mlp"}}, 2); },
                        "model.name digits-mlp has none"));
    QVERIFY(throws_with([&] { check({{"dist.pp", "2"}, {"dist.tp", "2"}}, 6); },
                        "dist.tp 2 x dist.pp 2 = 4 does not divide the 6 ranks"));
    QVERIFY(throws_with([&] { check({{"dist.pp", "2"}, {"train.micro_batches", "4"}, {"train.accumulate", "2"}}, 2); },
                        "train.micro_batches 4 and train.accumulate 2 are the same quantity"));
    // m < p under 1f1b runs, with the warning that the bubble grows.
    const std::string w = check({{"dist.pp", "4"}, {"train.micro_batches", "2"}}, 4);
    QVERIFY2(QString::fromStdString(w).contains("dist.pp 4 and train.micro_batches 2: the bubble grows"), w.c_str());
    QCOMPARE(check({{"dist.pp", "4"}, {"train.micro_batches", "2"}, {"dist.schedule", "gpipe"}}, 4), std::string());
  }

  // train.micro_batches is train.accumulate under the pipeline's name.
  void microBatchesSynonym() {
    Config c;
    QCOMPARE(micro_batches(c), 1);
    c.set("train.accumulate", "3");
    QCOMPARE(micro_batches(c), 3);
    QCOMPARE(train_options(c).accumulate, 3);
    c.set("train.micro_batches", "3");
    QCOMPARE(train_options(c).accumulate, 3);
    c.set("train.accumulate", "1");
    c.set("train.micro_batches", "5");
    QCOMPARE(train_options(c).accumulate, 5);
    c.set("train.accumulate", "2");
    QVERIFY(throws_with([&] { micro_batches(c); }, "train.micro_batches 5 and train.accumulate 2"));
  }

  // trainlab-cli train checks the layout before it starts anything.
  void cliRefusesBadLayout() {
    const CliResult r = run_cli({"train", "--model", "char-gpt", "--pp", "4", "--steps", "1", "--quiet", "--out",
                                 QDir::tempPath() + "/trainlab-pp-refused"}, 60000);
    QVERIFY2(r.code != 0 && r.err.contains("dist.pp 4 is more than model.layers 2"), qPrintable(describe(r)));
  }

  // The table a learner reads: 2 stages, 4 micro-batches under 1F1B.
  void text() {
    const std::string s = schedule_text(build_schedule(PipelineSchedule::OneFOneB, 2, 4));
    const std::string want =
        "1f1b: 2 stages, 4 micro-batches; F forward, B backward (input and weight gradients, 2 slots), . idle\n"
        "stage 0 | F0 F1 .  .  B0 B0 F2 B1 B1 F3 B2 B2 .  B3 B3\n"
        "stage 1 | .  F0 B0 B0 F1 B1 B1 F2 B2 B2 F3 B3 B3 .  . \n"
        "idle fraction 0.2 (15 slots)\n";
    QCOMPARE(QString::fromStdString(s), QString::fromStdString(want));
  }
};

QTEST_GUILESS_MAIN(TestPipelineSchedule)
#include "test_pipeline_schedule.moc"
