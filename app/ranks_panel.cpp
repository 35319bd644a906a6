#include "ranks_panel.h"

#include <QEvent>
#include <QLabel>
#include <QStackedLayout>
#include <QVBoxLayout>
#include <algorithm>

#include "plot_style.h"

namespace trainlab::app {

namespace {

const MemCategory kStack[] = {MemCategory::Weights,     MemCategory::Gradients, MemCategory::Optimizer,
                              MemCategory::Activations, MemCategory::Workspace, MemCategory::Communication};

QCustomPlot* make_plot(QWidget* parent, const QString& name, const QString& title) {
  auto* p = new QCustomPlot(parent);
  p->setObjectName(name);
  p->setMinimumHeight(220);
  p->plotLayout()->insertRow(0);
  auto* t = new QCPTextElement(p, title, QFont(parent->font().family(), parent->font().pointSize(), QFont::DemiBold));
  t->setMargins(QMargins(0, 4, 0, 0));
  p->plotLayout()->addElement(0, 0, t);
  p->legend->setVisible(true);
  p->legend->setFont(QFont(parent->font().family(), std::max(7, parent->font().pointSize() - 1)));
  p->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  style_plot(p, parent->palette());
  return p;
}

QCPTextElement* title_of(QCustomPlot* p) { return qobject_cast<QCPTextElement*>(p->plotLayout()->element(0, 0)); }

// Stacked bars at `keys`, one bar per key, one layer per category; `alpha` < 255 for the prediction.
void stack_bars(QCustomPlot* p, const QVector<double>& keys, const std::vector<MemoryBytes>& bytes, int alpha,
                bool named) {
  QCPBars* below = nullptr;
  for (MemCategory c : kStack) {
    const size_t ci = static_cast<size_t>(c);
    QVector<double> vals;
    bool any = false;
    for (const MemoryBytes& b : bytes) {
      vals << static_cast<double>(b.by_category[ci]);
      any = any || b.by_category[ci] > 0;
    }
    auto* bars = new QCPBars(p->xAxis, p->yAxis);
    QColor col = category_color(ci);
    bars->setPen(QPen(col.darker(130), 1.0, alpha < 255 ? Qt::DashLine : Qt::SolidLine));
    col.setAlpha(alpha);
    bars->setBrush(col);
    bars->setWidth(0.34);
    bars->setData(keys, vals, true);
    bars->setName(mem_category_name(c));
    if (!named || !any) bars->removeFromLegend();
    if (below) bars->moveAbove(below);
    below = bars;
  }
}

}  // namespace

RanksPanel::RanksPanel(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(6, 6, 6, 6);
  auto* holder = new QWidget(this);
  m_stack = new QStackedLayout(holder);
  m_empty = new QLabel(holder);
  m_empty->setObjectName("ranks_message");
  m_empty->setWordWrap(true);
  m_empty->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  auto* plots = new QWidget(holder);
  auto* pv = new QVBoxLayout(plots);
  pv->setContentsMargins(0, 0, 0, 0);
  m_memory = make_plot(plots, "ranks_memory", "Memory per rank");
  m_time = make_plot(plots, "ranks_time", "Time per rank");
  m_memory->setToolTip("Each rank's memory ledger at the last step, by category (left, solid), and the memory "
                       "core/plan predicts for that rank: ZeRO's shard of what its stage shards (right, lighter, dashed).");
  m_time->setToolTip("Each rank's step, mean over the steps after the first: compute, exposed communication (waits "
                     "for gradient and parameter collectives the computation did not hide) and waiting (the per-step "
                     "host collectives, where a rank waits for the slowest).");
  pv->addWidget(m_memory, 1);
  pv->addWidget(m_time, 1);
  m_stack->addWidget(m_empty);
  m_stack->addWidget(plots);
  v->addWidget(holder, 1);
  refresh();
}

void RanksPanel::set_run(std::shared_ptr<RunSeries> run) {
  m_run = std::move(run);
  m_shown_steps = -1;
  refresh();
}

QString RanksPanel::plot_title(Plot k) const { return title_of(plot(k))->text(); }

QString RanksPanel::message() const { return m_stack->currentWidget() == m_empty ? m_empty->text() : QString(); }

void RanksPanel::refresh() {
  if (!m_run || !m_run->has_ranks()) {
    m_empty->setText(!m_run ? QString("No run selected. Start a run or reopen one from the runs table.")
                            : "No per-rank figures for " + m_run->name +
                                  ": it trained on one rank. Set Ranks / GPUs above 1 (dist.ranks) to train over "
                                  "several ranks; each rank's memory and time split then show here.");
    m_stack->setCurrentWidget(m_empty);
    m_shown_steps = -1;
    return;
  }
  m_stack->setCurrentIndex(1);
  if (m_shown_steps == m_run->size()) return;
  m_shown_steps = m_run->size();
  draw_memory();
  draw_time();
}

void RanksPanel::draw_memory() {
  QCustomPlot* p = m_memory;
  p->clearPlottables();
  const auto& ranks = m_run->last_ranks;
  QVector<double> measured_keys, predicted_keys;
  std::vector<MemoryBytes> measured, predicted;
  QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
  double top = 0;
  for (const RankStepMetrics& r : ranks) {
    const double k = r.rank + 1.0;
    measured_keys << k - 0.18;
    predicted_keys << k + 0.18;
    measured.push_back(r.mem_current);
    predicted.push_back(r.mem_predicted);
    ticks->addTick(k, QString("rank %1\nledger | plan").arg(r.rank));
    top = std::max({top, static_cast<double>(r.mem_current.total()), static_cast<double>(r.mem_predicted.total())});
  }
  stack_bars(p, measured_keys, measured, 255, true);
  stack_bars(p, predicted_keys, predicted, 90, false);
  p->xAxis->setTicker(ticks);
  p->xAxis->setRange(0.4, static_cast<double>(ranks.size()) + 0.6);
  p->yAxis->setTicker(QSharedPointer<QCPAxisTicker>(new BytesTicker));
  p->yAxis->setRange(0, std::max(1.0, top) * 1.7);  // room for the legend above the bars
  title_of(p)->setText(QString("Memory per rank, step %1").arg(m_run->step.isEmpty() ? 0 : m_run->step.back()));
  p->replot();
}

void RanksPanel::draw_time() {
  QCustomPlot* p = m_time;
  p->clearPlottables();
  const DistTimeTotals& t = m_run->dist_times;
  QSharedPointer<QCPAxisTickerText> ticks(new QCPAxisTickerText);
  QVector<double> keys, compute, comm, wait;
  double top = 0;
  for (const RankTimeTotals& r : t.ranks) {
    const double n = std::max<long>(1, r.steps);
    keys << r.rank + 1.0;
    compute << r.compute_ms / n;
    comm << r.comm_ms / n;
    wait << r.wait_ms / n;
    top = std::max(top, r.step_ms / n);
    ticks->addTick(r.rank + 1.0, QString("rank %1\n%2 sent").arg(r.rank).arg(format_bytes(r.bytes_sent / n)));
  }
  const struct {
    const char* name;
    const QVector<double>& v;
    int color;
  } parts[] = {{"compute", compute, 2}, {"exposed communication", comm, 1}, {"waiting", wait, 8}};
  QCPBars* below = nullptr;
  for (const auto& part : parts) {
    auto* bars = new QCPBars(p->xAxis, p->yAxis);
    bars->setName(part.name);
    const QColor col = run_color(part.color);
    bars->setBrush(col);
    bars->setPen(QPen(col.darker(130)));
    bars->setWidth(0.5);
    bars->setData(keys, part.v, true);
    if (below) bars->moveAbove(below);
    below = bars;
  }
  p->xAxis->setTicker(ticks);
  p->xAxis->setRange(0.4, static_cast<double>(std::max<size_t>(1, t.ranks.size())) + 0.6);
  p->yAxis->setLabel("ms a step");
  p->yAxis->setRange(0, std::max(1e-3, top) * 1.6);
  const double e = t.efficiency_estimate();
  title_of(p)->setText(t.steps() == 0 ? QString("Time per rank (from step 2 on)")
                                      : QString("Time per rank, %1 steps\nscaling efficiency estimate %2")
                                            .arg(t.steps())
                                            .arg(number_text(100.0 * e, 'f', 1, " %")));
  p->replot();
}

void RanksPanel::render(Plot k, QCPPainter* painter, const QRectF& target) { render_plot(plot(k), painter, target); }

void RanksPanel::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange && m_memory) {
    style_plot(m_memory, palette());
    style_plot(m_time, palette());
    m_shown_steps = -1;
    refresh();
  }
  QWidget::changeEvent(e);
}

}  // namespace trainlab::app
