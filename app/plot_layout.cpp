// PlotPanel's layout: which plots apply to the runs drawn, the user's choice of plots, columns and
// x axis (kept in QSettings), the grid they are placed in, and the line above them (elapsed time
// and ETA).
#include <QGridLayout>
#include <QLabel>
#include <QMenu>
#include <QSettings>
#include <QToolButton>
#include <qcustomplot.h>

#include "plot_panel.h"
#include "plot_style.h"
#include "train/eta.h"

namespace trainlab::app {

// The plots that apply to the runs drawn: loss scale only with fp16, sparsity and bits only with
// compression, the learning rate only when it changes (a constant one is named in the loss title).
QVector<PlotKind> PlotPanel::applicable_plots() const {
  bool ls = false, sp = false, bits = false, const_lr = !m_drawn.isEmpty();
  for (const auto& d : m_drawn) {
    ls = ls || d.run->has_loss_scale();
    sp = sp || d.run->has_sparsity();
    bits = bits || d.run->has_bits();
    const_lr = const_lr && d.run->constant_lr();
  }
  QVector<PlotKind> shown = {PlotKind::Loss, PlotKind::Accuracy, PlotKind::Throughput, PlotKind::Memory};
  if (!const_lr) shown << PlotKind::LearningRate;
  if (ls) shown << PlotKind::LossScale;
  if (sp || bits) shown << PlotKind::Compression;
  return shown;
}

void PlotPanel::update_visibility() {
  bool ls = false, mfu = false, sp = false, bits = false;
  for (const auto& d : m_drawn) {
    ls = ls || d.run->has_loss_scale();
    mfu = mfu || d.run->has_mfu();
    sp = sp || d.run->has_sparsity();
    bits = bits || d.run->has_bits();
  }
  plot(PlotKind::Throughput)->yAxis2->setVisible(mfu);
  plot(PlotKind::LossScale)->yAxis2->setVisible(ls);
  plot(PlotKind::Compression)->yAxis->setVisible(sp || !bits);
  plot(PlotKind::Compression)->yAxis2->setVisible(bits);
  QVector<PlotKind> shown;
  for (PlotKind k : applicable_plots())
    if (plot_chosen(k)) shown << k;
  place_plots(shown);
  for (auto* p : m_plots) {
    p->legend->setVisible(p->graphCount() > 0);
    show_empty_hint(p, p->graphCount() == 0, palette().color(QPalette::Disabled, QPalette::Text));
  }
}

// The shown plots in m_columns columns, row by row; every cell has one column's width (no plot
// spans two), so that the plots of a column share their x pixels, and the axis rects of a column
// are tied by a margin group (their y axes and tick labels may differ in width).
void PlotPanel::place_plots(const QVector<PlotKind>& shown) {
  QVector<QPair<PlotKind, QPoint>> want, now;
  for (int i = 0; i < shown.size(); ++i) want.push_back({shown[i], QPoint(i % m_columns, i / m_columns)});
  for (int i = 0; i < m_grid->count(); ++i) {
    int r = 0, c = 0, rs = 0, cs = 0;
    m_grid->getItemPosition(i, &r, &c, &rs, &cs);
    for (int k = 0; k < kPlotCount; ++k)
      if (m_grid->itemAt(i)->widget() == m_plots[k]) now.push_back({static_cast<PlotKind>(k), QPoint(c, r)});
  }
  if (want == now) return;
  for (auto* p : m_plots) {
    m_grid->removeWidget(p);
    p->axisRect()->setMarginGroup(QCP::msLeft | QCP::msRight, nullptr);
  }
  for (int r = 0; r < m_grid->rowCount(); ++r) m_grid->setRowStretch(r, 0);
  for (int c = 0; c < m_grid->columnCount(); ++c) m_grid->setColumnStretch(c, 0);
  for (const auto& [k, at] : want) {
    m_grid->addWidget(plot(k), at.y(), at.x());
    plot(k)->axisRect()->setMarginGroup(QCP::msLeft | QCP::msRight, m_columns_margins[at.x()]);
    m_grid->setRowStretch(at.y(), 1);
    m_grid->setColumnStretch(at.x(), 1);
  }
  for (int k = 0; k < kPlotCount; ++k) m_plots[k]->setVisible(shown.contains(static_cast<PlotKind>(k)));
  for (auto* p : m_plots)
    if (p->isVisible()) p->replot(QCustomPlot::rpQueuedReplot);
}

bool PlotPanel::plot_shown(PlotKind k) const {
  return plot_chosen(k) && applicable_plots().contains(k);
}

void PlotPanel::set_plot_chosen(PlotKind k, bool on) {
  if (on)
    m_hidden.remove(static_cast<int>(k));
  else
    m_hidden.insert(static_cast<int>(k));
  save_choices();
  update_visibility();
}

void PlotPanel::set_columns(int n) {
  m_columns = std::clamp(n, 1, 3);
  save_choices();
  update_visibility();
}

void PlotPanel::set_x_axis(XAxis a) {
  const bool changed = a != m_x_axis;
  m_x_axis = a;
  if (m_x_box->currentIndex() != (a == XAxis::Time ? 1 : 0)) m_x_box->setCurrentIndex(a == XAxis::Time ? 1 : 0);
  for (auto* p : m_plots) {
    p->xAxis->setLabel(a == XAxis::Time ? "elapsed (h:m:s)" : "step");
    if (a == XAxis::Time) {
      auto t = QSharedPointer<QCPAxisTickerTime>::create();
      t->setTimeFormat("%h:%m:%s");
      p->xAxis->setTicker(t);
    } else {
      p->xAxis->setTicker(QSharedPointer<QCPAxisTicker>(new CompactTicker));
    }
  }
  if (!changed) return;
  save_choices();
  clear_crosshair();
  set_follow(true);
  rebuild();  // every curve and marker again, on the new x
}

void PlotPanel::save_choices() const {
  QSettings s;
  QStringList hidden;
  for (int k : m_hidden) hidden << kPlotKeys[k];
  hidden.sort();
  s.setValue("plots/hidden", hidden);
  s.setValue("plots/columns", m_columns);
  s.setValue("plots/x_axis", m_x_axis == XAxis::Time ? "time" : "step");
}

// "Plots" button: a checkable entry per plot and the number of columns.
QWidget* PlotPanel::make_plot_chooser(QWidget* parent) {
  auto* b = new QToolButton(parent);
  b->setObjectName("plot_chooser");
  b->setText("Plots");
  b->setPopupMode(QToolButton::InstantPopup);
  b->setToolTip("Choose which plots show and in how many columns (remembered). Plots that do not apply to the "
                "runs shown (fp16 loss scale, compression, a constant learning rate) stay hidden anyway.");
  auto* menu = new QMenu(b);
  for (int k = 0; k < kPlotCount; ++k) {
    QAction* a = menu->addAction(kPlotTitles[k]);
    a->setObjectName(QString("show_") + kPlotKeys[k]);
    a->setCheckable(true);
    connect(a, &QAction::toggled, this, [this, k](bool on) { set_plot_chosen(static_cast<PlotKind>(k), on); });
  }
  menu->addSeparator();
  auto* cols = new QActionGroup(menu);
  for (int n = 1; n <= 3; ++n) {
    QAction* a = menu->addAction(QString("%1 column%2").arg(n).arg(n > 1 ? "s" : ""));
    a->setObjectName(QString("columns_%1").arg(n));
    a->setCheckable(true);
    cols->addAction(a);
    connect(a, &QAction::triggered, this, [this, n] { set_columns(n); });
  }
  // The menu shows the current choice each time it opens.
  connect(menu, &QMenu::aboutToShow, this, [this, menu] {
    for (QAction* a : menu->actions()) {
      QSignalBlocker block(a);
      for (int k = 0; k < kPlotCount; ++k)
        if (a->objectName() == QString("show_") + kPlotKeys[k]) a->setChecked(plot_chosen(static_cast<PlotKind>(k)));
      if (a->objectName() == QString("columns_%1").arg(m_columns)) a->setChecked(true);
    }
  });
  b->setMenu(menu);
  return b;
}

QString PlotPanel::time_text() const {
  if (m_drawn.isEmpty() || m_drawn[0].run->size() == 0) return {};
  const RunSeries& r = *m_drawn[0].run;
  const double elapsed = r.elapsed_s.back();
  if (r.summary.is_object() || static_cast<long>(r.step.back()) >= r.total_steps)
    return "took " + QString::fromStdString(duration_text(elapsed));
  // The same estimate as trainlab-cli's progress line (train/eta.h).
  const double eta = eta_seconds(static_cast<long>(r.step.back()), r.total_steps, r.wall_s.back());
  return "elapsed " + QString::fromStdString(duration_text(elapsed)) + " · ETA " +
         QString::fromStdString(duration_text(eta));
}

// Validation points as dots only where they are far enough apart to be seen as points: dense ones
// (an evaluation every few steps) would bury the training curve under discs.
void PlotPanel::style_validation(QCustomPlot* p) {
  for (int g = 0; g < p->graphCount(); ++g) {
    QCPGraph* gr = p->graph(g);
    if (gr->scatterStyle().isNone() && gr->scatterSkip() == 0) continue;
    int in_view = 0;
    const QCPRange xr = p->xAxis->range();
    for (auto it = gr->data()->findBegin(xr.lower); it != gr->data()->findEnd(xr.upper); ++it) ++in_view;
    const double spacing = in_view > 0 ? p->axisRect()->width() / static_cast<double>(in_view) : 1e9;
    gr->setScatterSkip(spacing >= 12 ? 0 : static_cast<int>(std::ceil(12 / std::max(spacing, 0.01))) - 1);
  }
}

}  // namespace trainlab::app
