// Defects of the plot panel (issue 21), each checked where a user saw it: a click unticked Follow,
// char-gpt's throughput read samples/s, marker labels overlapped after a resize, the memory plot
// shrank in an overlay, the sparsity plot's x axis did not line up, a constant learning rate took
// a whole plot, dense validation points hid the training curve, and the throughput plot's legend
// sat on its samples/s curve, and marker labels were written over the accuracy curve.
#include <QtTest>
#include <qcustomplot.h>

#include "gui_support.h"
#include "plot_panel.h"
#include "plot_style.h"
#include "plot_test_data.h"

using namespace trainlab;
using namespace trainlab::app;
using plot_test::fake_run;
using plot_test::fake_step;

namespace {

void send_mouse(QWidget* w, QEvent::Type type, QPoint pos, Qt::MouseButton button, Qt::MouseButtons buttons) {
  QMouseEvent e(type, QPointF(pos), QPointF(w->mapToGlobal(pos)), button, buttons, Qt::NoModifier);
  QApplication::sendEvent(w, &e);
}

// The rectangle a marker label covers on screen (its anchors, in the plot's pixels).
QRectF label_rect(QCPItemText* t) { return QRectF(t->topLeft->pixelPosition(), t->bottomRight->pixelPosition()); }

// Where a plot's axis rect lies in the panel: its left and right edges.
QPair<int, int> axis_edges(PlotPanel& panel, PlotKind k) {
  QCustomPlot* p = panel.plot(k);
  return {p->mapTo(&panel, QPoint(p->axisRect()->left(), 0)).x(), p->mapTo(&panel, QPoint(p->axisRect()->right(), 0)).x()};
}

void settle(PlotPanel& panel) {
  panel.refresh();
  for (auto* p : panel.plots()) p->replot(QCustomPlot::rpImmediateRefresh);
  QApplication::processEvents();
  for (auto* p : panel.plots()) p->replot(QCustomPlot::rpImmediateRefresh);  // margin groups settle
}

}  // namespace

class TestPlotDefects : public QObject {
  Q_OBJECT
 private slots:
  void init() { gui_test::isolate_settings("test_plot_defects"); }

  // A curve along the top of the plot (throughput at its steady value): the legend leaves the top
  // corner for a free one, and then covers none of the curve's points.
  void legendKeepsClearOfTheCurve() {
    QCustomPlot p;
    p.resize(520, 320);
    p.legend->setVisible(true);
    p.axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    QCPGraph* g = p.addGraph();
    g->setName("samples/s");
    QVector<double> x, y;
    for (int i = 0; i < 1000; ++i) x << i, y << 85 + (i % 10);
    g->setData(x, y, true);
    p.xAxis->setRange(0, 1000);
    p.yAxis->setRange(0, 100);
    p.show();
    p.replot(QCustomPlot::rpImmediateRefresh);
    auto covered = [&p, g] {
      int n = 0;
      for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
        n += p.legend->outerRect().contains(QPointF(p.xAxis->coordToPixel(it->key), p.yAxis->coordToPixel(it->value)).toPoint());
      return n;
    };
    QVERIFY(covered() > 0);  // where it was: on the curve
    QVERIFY(place_legend_clear(&p));
    p.replot(QCustomPlot::rpImmediateRefresh);
    QCOMPARE(covered(), 0);
    QVERIFY(!place_legend_clear(&p));  // settled: no flicker
  }

  // A marker's label on a curve that rises to the top (the accuracy) is written where the curve is
  // not: along the bottom (it was written over the curve at the top).
  void markerLabelsLeaveARisingCurve() {
    QCustomPlot p;
    p.resize(520, 320);
    QCPGraph* g = p.addGraph();
    QVector<double> x, y;
    for (int i = 0; i < 1000; ++i) x << i, y << 100 * (1 - std::exp(-i / 60.0));
    g->setData(x, y, true);
    p.xAxis->setRange(0, 1000);
    p.yAxis->setRange(0, 100);
    auto* t = new QCPItemText(&p);
    t->setObjectName("marker");
    t->setText("dtype: fp32 -> bf16");
    t->position->setTypeX(QCPItemPosition::ptPlotCoords);
    t->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    t->position->setCoords(300, 0.03);
    p.show();
    p.replot(QCustomPlot::rpImmediateRefresh);
    layout_marker_labels(&p);
    p.replot(QCustomPlot::rpImmediateRefresh);
    const QRectF r = label_rect(t);
    int covered = 0;
    for (int i = 0; i < x.size(); ++i) covered += r.contains(QPointF(p.xAxis->coordToPixel(x[i]), p.yAxis->coordToPixel(y[i])));
    QCOMPARE(covered, 0);
    QVERIFY(t->visible());
  }

  // A gradual pruning schedule: eight markers a few dozen pixels apart, each labelled
  // "prune: 26.4% (gradual, per layer)". The full labels stacked in three rows read as a block of
  // text over the curves and half of them were left out; shortened ("prune: 26.4%", "46.2%", ...)
  // each marker keeps its label, in at most two rows, none overlapping.
  void denseMarkersKeepShortLabelsInTwoRows() {
    QCustomPlot p;
    p.resize(520, 240);
    p.xAxis->setRange(0, 950);
    const double sparsity[] = {26.4, 46.2, 60.5, 70.1, 75.8, 78.9, 79.9, 80.0};
    QVector<QCPItemText*> labels;
    for (int i = 0; i < 8; ++i) {
      auto* t = new QCPItemText(&p);
      t->setObjectName("marker");
      t->setText(QString(" prune: %1% (gradual, per layer)").arg(sparsity[i]));
      t->position->setTypeX(QCPItemPosition::ptPlotCoords);
      t->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
      t->position->setCoords(200 + 100 * i, 0.03);
      labels << t;
    }
    p.show();
    QVERIFY(QTest::qWaitForWindowExposed(&p));
    p.replot(QCustomPlot::rpImmediateRefresh);
    layout_marker_labels(&p);
    p.replot(QCustomPlot::rpImmediateRefresh);
    QSet<int> rows;
    for (QCPItemText* t : labels) {
      QVERIFY2(t->visible(), qPrintable(t->text() + " left out"));
      rows << qRound(label_rect(t).top());
    }
    QVERIFY2(rows.size() <= 2, qPrintable(QString("%1 rows").arg(rows.size())));
    for (int a = 0; a < labels.size(); ++a)
      for (int b = a + 1; b < labels.size(); ++b)
        QVERIFY2(!label_rect(labels[a]).intersects(label_rect(labels[b])), qPrintable(QString("%1 and %2").arg(a).arg(b)));
    QCOMPARE(labels[0]->text(), QString(" prune: 26.4%"));  // the first says what; the others how much
    QCOMPARE(labels[1]->text(), QString(" 46.2%"));
    // Wide enough, the labels are whole again.
    p.resize(2400, 240);
    p.replot(QCustomPlot::rpImmediateRefresh);
    layout_marker_labels(&p);
    QCOMPARE(labels[1]->text(), QString(" prune: 46.2% (gradual, per layer)"));
  }

  // A title in the plot's layout (the roofline's, the ranks') follows the palette: it was black
  // on the dark palette's dark Base.
  void titlesFollowADarkPalette() {
    QCustomPlot p;
    p.plotLayout()->insertRow(0);
    auto* title = new QCPTextElement(&p, "Roofline");
    p.plotLayout()->addElement(0, 0, title);
    QPalette dark;
    dark.setColor(QPalette::WindowText, QColor(230, 230, 230));
    dark.setColor(QPalette::Base, QColor(30, 30, 30));
    style_plot(&p, dark);
    QCOMPARE(title->textColor(), QColor(230, 230, 230));
  }

  // Before any run the plots say how they fill (they were empty axes from 0 to 5 with no word, and
  // the memory plot a stamp in its corner); the hint goes once a run is drawn.
  void emptyPlotsSayHowTheyFill() {
    PlotPanel panel;
    panel.resize(1000, 700);
    panel.show();
    auto hint = [&panel](PlotKind k) -> QCPItemText* {
      QCustomPlot* p = panel.plot(k);
      for (int i = 0; i < p->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(p->item(i)); t && t->objectName() == "empty_hint") return t;
      return nullptr;
    };
    panel.set_runs({});
    for (PlotKind k : {PlotKind::Loss, PlotKind::Accuracy, PlotKind::Throughput, PlotKind::Memory}) {
      QVERIFY(hint(k) && hint(k)->visible());
      QVERIFY(hint(k)->text().contains("press Start"));
    }
    // The memory plot, whose legend sits under it, keeps its width while that legend is empty.
    QCustomPlot* mem = panel.plot(PlotKind::Memory);
    mem->replot(QCustomPlot::rpImmediateRefresh);
    QVERIFY2(mem->axisRect()->width() > mem->width() / 2,
             qPrintable(QString("axes %1 of %2 pixels").arg(mem->axisRect()->width()).arg(mem->width())));
    panel.set_runs({fake_run("r", 50)});
    QVERIFY(!hint(PlotKind::Loss) || !hint(PlotKind::Loss)->visible());
  }

  void clickKeepsFollowDragEndsIt() {
    PlotPanel panel;
    panel.resize(1200, 800);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    panel.set_runs({fake_run("r", 300)});
    settle(panel);
    QCustomPlot* p = panel.plot(PlotKind::Loss);
    const QPoint c = p->axisRect()->center();
    QTest::mouseClick(p, Qt::LeftButton, Qt::NoModifier, c);
    QVERIFY2(panel.follow(), "a click on a plot must not untick Follow");
    const QCPRange before = p->xAxis->range();
    send_mouse(p, QEvent::MouseButtonPress, c, Qt::LeftButton, Qt::LeftButton);
    send_mouse(p, QEvent::MouseMove, c + QPoint(40, 0), Qt::NoButton, Qt::LeftButton);
    send_mouse(p, QEvent::MouseMove, c + QPoint(80, 0), Qt::NoButton, Qt::LeftButton);
    send_mouse(p, QEvent::MouseButtonRelease, c + QPoint(80, 0), Qt::LeftButton, Qt::NoButton);
    QVERIFY(p->xAxis->range() != before);
    QVERIFY2(!panel.follow(), "a drag that pans the view ends Follow");
  }

  void charGptThroughputInTokens() {
    PlotPanel panel;
    auto text = fake_run("text", 100);
    text->config = Json::parse(R"({"model": {"name": "char-gpt"}})");
    panel.set_runs({text});
    QVERIFY(panel.graph(PlotKind::Throughput, "tokens/s"));
    QVERIFY(!panel.graph(PlotKind::Throughput, "samples/s"));
    QCOMPARE(panel.plot(PlotKind::Throughput)->yAxis->label(), QString("tokens/s"));
    QVERIFY2(panel.plot_title(PlotKind::Throughput).contains("tokens/s"), qPrintable(panel.plot_title(PlotKind::Throughput)));
    // The value is the trainer's count of tokens per second (train/trainer.cpp), drawn as it is.
    panel.set_smoothing(0);
    QCOMPARE(panel.graph(PlotKind::Throughput, "tokens/s")->data()->at(10)->value, text->samples_per_s[10]);
    // A classifier next to it keeps samples/s; the axis names both units.
    auto mlp = fake_run("mlp", 100);
    panel.set_runs({text, mlp});
    QVERIFY(panel.graph(PlotKind::Throughput, "mlp · samples/s"));
    QCOMPARE(panel.plot(PlotKind::Throughput)->yAxis->label(), QString("tokens/s · samples/s"));
  }

  void markerLabelsNeverOverlap() {
    PlotPanel panel;
    panel.resize(1500, 800);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    auto run = std::make_shared<RunSeries>();
    run->name = "r";
    for (long i = 1; i <= 1000; ++i) {
      StepMetrics m = fake_step(i, 1000, 100);
      if (i % 60 == 0) m.event = "sparsity: " + std::to_string(i / 10) + " %";
      run->append(m);
    }
    panel.set_runs({run});
    settle(panel);
    // Narrower: the labels must be placed again (they were placed only when data arrived).
    for (int w : {900, 650, 1500}) {
      panel.resize(w, 800);
      QApplication::processEvents();
      for (auto* p : panel.plots()) p->replot(QCustomPlot::rpImmediateRefresh);
      QCustomPlot* p = panel.plot(PlotKind::Loss);
      QVector<QRectF> shown;
      for (int i = 0; i < p->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(p->item(i)); t && t->objectName() == "marker" && t->visible())
          shown << label_rect(t);
      QVERIFY2(shown.size() >= 3, qPrintable(QString::number(shown.size())));
      for (int a = 0; a < shown.size(); ++a)
        for (int b = a + 1; b < shown.size(); ++b)
          QVERIFY2(!shown[a].intersects(shown[b]),
                   qPrintable(QString("width %1: labels %2 and %3 overlap").arg(w).arg(a).arg(b)));
    }
  }

  void memoryPlotKeepsItsWidthInAnOverlay() {
    PlotPanel panel;
    panel.resize(1400, 900);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    panel.set_runs({fake_run("digits-mlp-fp32 baseline with a long name", 200),
                    fake_run("digits-mlp-bf16 second run with a long name", 200),
                    fake_run("digits-mlp-fp16 third run with a long name", 200)});
    settle(panel);
    const int mem = panel.plot(PlotKind::Memory)->axisRect()->width();
    const int thr = panel.plot(PlotKind::Throughput)->axisRect()->width();
    QVERIFY2(mem >= thr * 0.9, qPrintable(QString("memory %1 px, throughput %2 px").arg(mem).arg(thr)));
    QVERIFY2(panel.plot(PlotKind::Memory)->axisRect()->height() >= 100,
             qPrintable(QString::number(panel.plot(PlotKind::Memory)->axisRect()->height())));
    // Its legend (below it) wraps into as many columns as fit: no entry cut off at the edge.
    QCustomPlot* mp = panel.plot(PlotKind::Memory);
    int entries = 0;
    for (int i = 0; i < mp->legend->itemCount(); ++i) {
      QCPAbstractLegendItem* item = mp->legend->item(i);
      if (!item) continue;  // an empty cell of the last row
      ++entries;
      QVERIFY2(item->outerRect().right() <= mp->width(),
               qPrintable(QString("%1 ends at %2 of %3").arg(i).arg(item->outerRect().right()).arg(mp->width())));
    }
    QVERIFY(entries >= 6);
  }

  void compressionXAxisLinesUp() {
    PlotPanel panel;
    panel.resize(1400, 1000);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    auto run = std::make_shared<RunSeries>();
    run->name = "pruned";
    for (long i = 1; i <= 500; ++i) {
      StepMetrics m = fake_step(i, 500, 50);
      m.sparsity = std::min(50.0, i / 5.0);
      m.bits_per_weight = 4;
      run->append(m);
    }
    panel.set_runs({run});
    settle(panel);
    QVERIFY(panel.plot_shown(PlotKind::Compression));
    const auto comp = axis_edges(panel, PlotKind::Compression);
    bool matched = false;
    for (PlotKind k : {PlotKind::Loss, PlotKind::Accuracy})
      matched = matched || axis_edges(panel, k) == comp;
    QVERIFY2(matched, qPrintable(QString("compression x axis %1-%2, loss %3-%4, accuracy %5-%6")
                                     .arg(comp.first).arg(comp.second)
                                     .arg(axis_edges(panel, PlotKind::Loss).first).arg(axis_edges(panel, PlotKind::Loss).second)
                                     .arg(axis_edges(panel, PlotKind::Accuracy).first)
                                     .arg(axis_edges(panel, PlotKind::Accuracy).second)));
  }

  void constantLearningRateIsNamedNotPlotted() {
    PlotPanel panel;
    panel.set_runs({fake_run("fixed", 200)});
    QVERIFY(!panel.plot_shown(PlotKind::LearningRate));
    QVERIFY2(panel.plot_title(PlotKind::Loss).contains("learning rate 0.001 (constant)"),
             qPrintable(panel.plot_title(PlotKind::Loss)));
    auto sched = fake_run("warmup", 200);
    for (int i = 0; i < sched->size(); ++i) sched->lr[i] = 1e-3 * std::min(1.0, i / 50.0);
    panel.set_runs({sched});
    QVERIFY(panel.plot_shown(PlotKind::LearningRate));
    QCOMPARE(panel.plot_title(PlotKind::Loss), QString("Loss"));
  }

  void denseValidationStaysBehindTheTrainingCurve() {
    PlotPanel panel;
    panel.resize(1000, 700);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    panel.set_runs({fake_run("dense", 2000, 2000, 2)});  // 1000 validation points
    settle(panel);
    QCPGraph* train = panel.graph(PlotKind::Loss, "train");
    QCPGraph* val = panel.graph(PlotKind::Loss, "validation");
    QVERIFY(train && val);
    QCOMPARE(val->dataCount(), 1000);
    QVERIFY2(val->layer()->index() < train->layer()->index(), "validation is drawn behind the training curve");
    QVERIFY2(val->scatterSkip() >= 10, qPrintable(QString::number(val->scatterSkip())));
    // Sparse validation keeps every dot.
    panel.set_runs({fake_run("sparse", 2000, 2000, 200)});
    settle(panel);
    QCOMPARE(panel.graph(PlotKind::Loss, "validation")->scatterSkip(), 0);
  }
};

QTEST_MAIN(TestPlotDefects)
#include "test_plot_defects.moc"
