// View > Roofline (issue 19): a short CPU run with kernel timing places its kernels against the
// measured roofs (points, labels, a tooltip with the achieved FLOP/s and % of the roof, the same
// numbers as train/roofline.h's table); a live run's view follows its steps; a run without kernel
// times says how to get them; the window has the dock and its View action; the HTML and PDF
// reports include the figure.
#include <QDockWidget>
#include <QMenuBar>
#include <qcustomplot.h>
#include <QtTest>
#include <filesystem>

#include "gui_support.h"
#include "main_window.h"
#include "report.h"
#include "roofline_view.h"
#include "train/run_record.h"
#include "util/safe_file.h"

using namespace trainlab;
using namespace trainlab::app;

namespace {
// A short digits run on the CPU with kernel timing, calibrated against made-up roofs in a private
// cache (fp32 1 TFLOP/s, 10 GB/s) so the test does not spend seconds measuring.
QString timed_run(const QString& root, const QString& folder) {
  const std::string cache = QDir(root).absoluteFilePath("cache").toStdString();
  qputenv("XDG_CACHE_HOME", QByteArray::fromStdString(cache));
  auto be = create_backend("cpu");
  Calibration c;
  c.device = be->info().name;
  c.software = be->info().software;
  c.lab_version = lab_version();
  c.build = lab_build();
  c.peaks = calibration_plan(be->info());
  for (CalibratedPeak& p : c.peaks) p.tflops = 1.0, p.size = 64;
  c.bandwidth_bytes_per_s = 10e9;
  c.seconds = 0.1;
  std::filesystem::create_directories(cache + "/trainlab");
  AtomicFile f(calibration_file(cache + "/trainlab", be->info()));
  f.write(calibration_to_json(c));
  f.commit();
  Config cfg;
  cfg.set_json("train.steps", static_cast<int64_t>(6));
  cfg.set_json("device.name", std::string("cpu"));
  cfg.set_json("device.kernel_timing", true);
  cfg.set_json("run.save_weights", false);
  const QString dir = QDir(root).absoluteFilePath(folder);
  cfg.set_json("run.out", dir.toStdString());
  Trainer(cfg).run();
  qunsetenv("XDG_CACHE_HOME");
  return dir;
}

// A char-gpt step's kernels as a CPU run times them (one step of a real record): the LayerNorm and
// GELU passes sit at one intensity, the products together at another, on made-up roofs.
std::shared_ptr<RunSeries> crowded_run() {
  auto run = std::make_shared<RunSeries>();
  run->name = "crowded";
  run->precision = "fp32";
  run->kernel_steps = 1;
  const struct {
    const char* name;
    double ms, flops, bytes;
  } kernels[] = {{"linear_backward", 93.4, 5505024000, 122265600}, {"linear_forward", 53.6, 3289382912, 80274944},
                 {"attention_backward", 32.9, 335544320, 33685504}, {"gelu_backward", 12.1, 50331648, 50331648},
                 {"attention_forward", 11.6, 134217728, 16908288},  {"gemm", 11.5, 1073741824, 21495808},
                 {"gelu_forward", 10.1, 33554432, 33554432},        {"layernorm_backward", 4.46, 31457280, 31628800},
                 {"softmax_xent", 1.9, 1597440, 2146304},           {"layernorm_forward", 0.97, 20971520, 21140480},
                 {"adamw", 0.48, 5902848, 11805812},                {"embedding_backward", 0.22, 8320, 2179584},
                 {"embedding_forward", 0.079, 524288, 4210688}};
  for (const auto& k : kernels) run->kernels.push_back({k.name, k.ms, 1, k.flops, k.bytes});
  auto be = create_backend("cpu");
  Calibration c;
  c.device = be->info().name;
  c.peaks = calibration_plan(be->info());
  for (CalibratedPeak& p : c.peaks) p.tflops = 0.168, p.size = 64;
  c.bandwidth_bytes_per_s = 25.4e9;
  run->roofline = c;
  return run;
}

// Labels apart: no two overlap; at most one a kernel.
void check_apart(const std::vector<QRectF>& rects, const RooflineView& v) {
  for (size_t i = 0; i < rects.size(); ++i)
    for (size_t j = 0; j < i; ++j) QVERIFY2(!rects[i].intersects(rects[j]), qPrintable(QString("labels %1 and %2").arg(j).arg(i)));
  QVERIFY(static_cast<int>(rects.size()) <= v.kernel_points());
}
}  // namespace

class TestRooflineView : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir m_tmp;
  QString m_run;

 private slots:
  void initTestCase() {
    gui_test::isolate_settings("test_roofline_view");
    QVERIFY(m_tmp.isValid());
    m_run = timed_run(m_tmp.path(), "timed");
  }

  void placesTheKernelsOfACpuRun() {
    auto run = std::make_shared<RunSeries>(RunSeries::load(m_run));
    RooflineView v;
    v.resize(900, 600);
    v.show();
    v.set_run(run);
    QVERIFY2(v.message().isEmpty(), qPrintable(v.message()));
    QVERIFY(v.kernel_points() >= 3);  // the products, the activation, the loss, the optimizer
    QVERIFY(v.plot_title().contains("Roofline of"));
    // The same numbers as the CLI's table: build_roofline over the record's kernels.
    QString why;
    const auto r = roofline_of(*run, &why);
    QVERIFY(r);
    QCOMPARE(r->peak_flops_per_s, 1e12);
    const RooflinePoint* linear = nullptr;
    for (const auto& p : r->points)
      if (p.name == "linear_forward") linear = &p;
    QVERIFY(linear && linear->placed());
    v.plot()->replot();
    const QPointF at(v.plot()->xAxis->coordToPixel(linear->intensity), v.plot()->yAxis->coordToPixel(linear->flops_per_s));
    const QString tip = v.tooltip_at(at);
    QVERIFY2(tip.contains("linear_forward") && tip.contains("% of its roof") && tip.contains("FLOP/s achieved"),
             qPrintable(tip));
    QVERIFY(v.tooltip_at(QPointF(-100, -100)).isEmpty());
    // Roofs: the memory roof and a compute roof per measured precision, then one graph a kernel.
    QCOMPARE(v.plot()->graphCount(), 1 + static_cast<int>(r->peaks.size()) + v.kernel_points());
  }

  void followsALiveRun() {
    const LoadedRun loaded = load_run(m_run.toStdString());
    auto live = std::make_shared<RunSeries>();
    live->name = "live";
    RooflineView v;
    v.set_run(live);
    QVERIFY(v.message().contains("Kernel timing"));
    live->append(loaded.steps.front());
    v.refresh();
    QVERIFY2(v.message().isEmpty(), qPrintable(v.message()));
    const int first = v.kernel_points();
    QVERIFY(first > 0);
    const QString title = v.plot_title();
    live->append(loaded.steps.back());
    v.refresh();
    QVERIFY(v.plot_title() != title);  // more kernel time
  }

  void runWithoutTimingSaysHow() {
    const QString dir = gui_test::make_run(m_tmp.path(), "untimed", "fp32", 4);
    RooflineView v;
    v.set_run(std::make_shared<RunSeries>(RunSeries::load(dir)));
    QCOMPARE(v.kernel_points(), 0);
    QVERIFY2(v.message().contains("device.kernel_timing"), qPrintable(v.message()));
    v.set_run(nullptr);
    QVERIFY(!v.message().isEmpty());
  }

  // In a dock beside the plots (480 px): no text over other text and none cut off. The roofs'
  // names printed beside their lines lay over each other where peaks are alike (here all 1 TFLOP/s),
  // kernels' labels over each other where kernels sit together, the title ran out of the plot.
  void labelsApartInANarrowDock() {
    RooflineView v;
    v.resize(480, 420);
    v.show();
    v.set_run(std::make_shared<RunSeries>(RunSeries::load(m_run)));
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    auto* plot = v.findChild<QCustomPlot*>("roofline_plot");
    QVERIFY(plot);
    plot->replot();  // labels are placed (or hidden) at each layout: the one of the dock's final size
    std::vector<QRectF> rects;
    for (int i = 0; i < plot->itemCount(); ++i)
      if (auto* t = qobject_cast<QCPItemText*>(plot->item(i)); t && t->visible())
        rects.emplace_back(QRectF(t->topLeft->pixelPosition(), t->bottomRight->pixelPosition()).normalized());
    QVERIFY(rects.size() >= 3);
    for (size_t i = 0; i < rects.size(); ++i) {
      QVERIFY2(QRectF(plot->rect()).contains(rects[i]), qPrintable(QString("label %1 cut off").arg(i)));
      for (size_t j = 0; j < i; ++j) QVERIFY2(!rects[i].intersects(rects[j]), qPrintable(QString("labels %1 and %2").arg(j).arg(i)));
    }
    const QFontMetrics fm(qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0))->font());
    for (const QString& line : v.plot_title().split('\n'))
      QVERIFY2(fm.horizontalAdvance(line) <= plot->width(), qPrintable(line));
    QVERIFY(plot->legend->visible() && plot->legend->itemCount() >= 2);  // the roofs, named there
  }

  // The report's roofline page (issue 19): a char-gpt step's clustered kernels, rendered where
  // the PDF draws the figure, every label shown and apart (they printed over each other: the
  // placement then gave up on the right of the point); in the narrow dock apart too, hiding what
  // does not fit.
  void reportPageLabelsApart() {
    RooflineView v;
    v.resize(1200, 800);  // as Report::write_pdf
    v.set_run(crowded_run());
    QCOMPARE(v.kernel_points(), 13);
    const QRectF fig = Report::roofline_figure(Report::pdf_page_layout().paintRectPixels(96));
    QImage page(fig.size().toSize(), QImage::Format_ARGB32);
    page.fill(Qt::white);
    QCPPainter painter(&page);
    v.render(&painter, fig);
    painter.end();
    check_apart(v.rendered_labels(), v);
    QCOMPARE(int(v.rendered_labels().size()), 13);

    RooflineView dock;
    dock.resize(480, 420);
    dock.show();
    dock.set_run(crowded_run());
    QVERIFY(QTest::qWaitForWindowExposed(&dock));
    dock.plot()->replot();
    check_apart(dock.label_rects(), dock);
    QVERIFY2(dock.label_rects().size() >= 11, qPrintable(QString::number(dock.label_rects().size())));  // 13 here
  }

  void windowHasRooflineDockAndAction() {
    MainWindow w(m_tmp.filePath("runs"));
    QVERIFY(w.roofline_dock());
    QVERIFY(!w.roofline_dock()->isVisible());
    QAction* action = w.findChild<QAction*>("action_roofline");
    QVERIFY(action);
    QVERIFY(action->text().contains("Roofline"));
    w.show();
    action->trigger();
    QVERIFY(w.roofline_dock()->isVisible());
  }

  void reportIncludesTheFigure() {
    const QString html_path = m_tmp.filePath("roofline.html");
    Report::from_dirs({m_run}).write(html_path);
    QFile f(html_path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString html = QString::fromUtf8(f.readAll());
    QVERIFY(html.contains("alt='Roofline of"));
    const QString pdf = m_tmp.filePath("roofline.pdf");
    Report::from_dirs({m_run}).write(pdf);
    QVERIFY(QFileInfo(pdf).size() > 0);
    // A run without kernel times has no roofline figure.
    const QString other = m_tmp.filePath("plain.html");
    Report::from_dirs({gui_test::make_run(m_tmp.path(), "plain", "fp32", 4)}).write(other);
    QFile g(other);
    QVERIFY(g.open(QIODevice::ReadOnly));
    QVERIFY(!QString::fromUtf8(g.readAll()).contains("alt='Roofline of"));
  }
};

QTEST_MAIN(TestRooflineView)
#include "test_roofline_view.moc"
