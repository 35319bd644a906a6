// Not a test (no ctest entry): how long the plot panel takes from a resize to the repaint of every
// plot, with a run of a million steps and all seven plots shown (issue 21: within 100 ms).
//
//   bench_plot_repaint [--steps N] [--resizes N] [--record DIR]
//
// Synthesises a run record of N steps (default 1,000,000) in memory: a falling loss, a cosine
// learning rate, fp16 loss scaling, gradual pruning and 4-bit QAT, so that every plot applies; or
// opens the run record in DIR. Then resizes the panel between 1400x900 and 1200x780 and prints,
// as one JSON line, the median, minimum and maximum milliseconds from resize() until every plot
// has repainted, the milliseconds of one immediate replot of every plot (replot_all_ms), of reading
// the record (load_ms, thinned as the window reads it) and of building the plots (open_ms). Run
// it under a display server or QT_QPA_PLATFORM=offscreen.
#include <QApplication>
#include <QElapsedTimer>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <qcustomplot.h>

#include "plot_panel.h"
#include "plot_test_data.h"

using namespace trainlab;
using namespace trainlab::app;

namespace {

std::shared_ptr<RunSeries> synthesise(long steps) {
  auto run = std::make_shared<RunSeries>();
  run->name = "synthetic";
  run->config = Json::parse(R"({"precision": {"dtype": "fp16"}})");
  for (long i = 1; i <= steps; ++i) {
    StepMetrics m = plot_test::fake_step(i, steps, 1000);
    m.precision = "fp16";
    m.lr = 1e-3 * 0.5 * (1 + std::cos(M_PI * static_cast<double>(i) / static_cast<double>(steps)));
    m.loss_scale = 65536.0 / static_cast<double>(1 << (i * 4 / steps));
    m.skipped_steps = i / 10000;
    m.sparsity = 50.0 * static_cast<double>(i) / static_cast<double>(steps);
    m.bits_per_weight = 4;
    if (i % (steps / 10) == 0) m.event = "sparsity: " + std::to_string(i * 50 / steps) + " %";
    run->append(m);
  }
  return run;
}

// Counts the paint events of the plots since the last reset.
class PaintCounter : public QObject {
 public:
  QSet<QObject*> painted;
  bool eventFilter(QObject* o, QEvent* e) override {
    if (e->type() == QEvent::Paint) painted.insert(o);
    return false;
  }
};

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  long steps = 1000000;
  int resizes = 21;
  QString record;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::max(1000L, std::atol(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--resizes")) resizes = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--record")) record = argv[i + 1];
    else {
      std::fprintf(stderr, "bench_plot_repaint: unknown option %s (expected --steps N, --resizes N, --record DIR)\n",
                   argv[i]);
      return 2;
    }
  }
  QElapsedTimer t;
  t.start();
  std::shared_ptr<RunSeries> run;
  try {
    // A record is read as the window opens one: thinned to 100,000 rows (main_window.cpp's kPlotRows).
    run = record.isEmpty() ? synthesise(steps) : std::make_shared<RunSeries>(RunSeries::load(record, 100000));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_plot_repaint: %s\n", e.what());
    return 1;
  }
  const qint64 load_ms = t.elapsed();
  PlotPanel panel;
  panel.resize(1400, 900);
  panel.show();
  t.restart();
  panel.set_runs({run});
  const qint64 open_ms = t.elapsed();
  PaintCounter counter;
  QList<QCustomPlot*> shown;
  for (auto* p : panel.plots())
    if (p->isVisible()) {
      shown << p;
      p->installEventFilter(&counter);
    }
  QVector<double> ms;
  for (int i = 0; i < resizes + 1; ++i) {  // the first is a warm-up
    counter.painted.clear();
    t.restart();
    panel.resize(i % 2 ? 1400 : 1200, i % 2 ? 900 : 780);
    while (counter.painted.size() < shown.size()) {
      QApplication::processEvents(QEventLoop::AllEvents, 5);
      if (t.elapsed() > 10000) {
        std::fprintf(stderr, "bench_plot_repaint: only %d of %d plots repainted within 10 s of a resize\n",
                     static_cast<int>(counter.painted.size()), static_cast<int>(shown.size()));
        return 1;
      }
    }
    if (i > 0) ms << static_cast<double>(t.nsecsElapsed()) / 1e6;
  }
  // What test_plot_panel::millionPoints used to time: every shown plot replotted at once, without
  // the event loop (its envelope already built), after one warm-up pass.
  for (auto* p : shown) p->replot(QCustomPlot::rpImmediateRefresh);
  t.restart();
  for (auto* p : shown) p->replot(QCustomPlot::rpImmediateRefresh);
  const double replot_all_ms = static_cast<double>(t.nsecsElapsed()) / 1e6;
  std::sort(ms.begin(), ms.end());
  std::printf("{\"bench\": \"plot_repaint\", \"steps\": %d, \"plots_shown\": %d, \"resizes\": %d, "
              "\"median_ms\": %.1f, \"min_ms\": %.1f, \"max_ms\": %.1f, \"replot_all_ms\": %.1f, \"load_ms\": %lld, "
              "\"open_ms\": %lld}\n",
              run->size(), static_cast<int>(shown.size()), static_cast<int>(ms.size()), ms[ms.size() / 2], ms.front(),
              ms.back(), replot_all_ms, load_ms, open_ms);
  return 0;
}
