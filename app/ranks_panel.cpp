#include "ranks_panel.h"

#include <QEvent>
#include <QLabel>
#include <QStackedLayout>
#include <QVBoxLayout>
#include <algorithm>

#include "config/dist_options.h"
#include "plot_style.h"
#include "util/error.h"

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

// Where rank r stands on the x axis: the ranks of a tensor-parallel group side by side, a gap
// between groups (rank = tp_rank + tp x dp_rank: a group is tp adjacent ranks).
double rank_key(int r, int tp) { return r + 1.0 + (tp > 1 ? 0.5 * (r / tp) : 0.0); }

// "rank 3" or, in a tensor-parallel run, "rank 3\ngroup 1" (its tensor-parallel group).
QString rank_label(int r, int tp) {
  return tp > 1 ? QString("rank %1\ngroup %2").arg(r).arg(r / tp) : QString("rank %1").arg(r);
}

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

int tensor_parallel_degree(const RunSeries& run) {
  const Json flat = flatten_config(run.config);
  const auto it = flat.find("dist.tp");
  return it != flat.end() && it->is_number_integer() ? std::max(1, it->get<int>()) : 1;
}

QString layout_text(const RunSeries& run) {
  // The record's dist.* keys as the trainer read them (a record of another build: its defaults).
  DistOptions o;
  try {
    o = dist_options(Config::from_record(run.config));
  } catch (const Error&) {
    o.tp = tensor_parallel_degree(run);
  }
  return QString::fromStdString(dist_layout_text(o, static_cast<int>(std::max<size_t>(1, run.last_ranks.size()))));
}

RanksPanel::RanksPanel(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(6, 6, 6, 6);
  m_layout = new QLabel(this);
  m_layout->setObjectName("ranks_layout");
  m_layout->setWordWrap(true);
  m_layout->setToolTip("How the run spreads over its ranks (dist.ranks, dist.tp, dist.sequence_parallel, "
                       "dist.strategy): a tensor-parallel group is dist.tp adjacent ranks, drawn side by side.");
  v->addWidget(m_layout);
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

QString RanksPanel::layout_line() const { return m_layout->text(); }

QString RanksPanel::message() const { return m_stack->currentWidget() == m_empty ? m_empty->text() : QString(); }

void RanksPanel::refresh() {
  if (!m_run || !m_run->has_ranks()) {
    m_empty->setText(!m_run ? QString("No run selected. Start a run or reopen one from the runs table.")
                            : "No per-rank figures for " + m_run->name +
                                  ": it trained on one rank. Set Ranks in the Parallelism section above 1 (dist.ranks) "
                                  "to train over several ranks; each rank's memory and time split then show here.");
    m_stack->setCurrentWidget(m_empty);
    m_layout->clear();
    m_shown_steps = -1;
    return;
  }
  m_stack->setCurrentIndex(1);
  m_layout->setText("<b>Layout</b>: " + layout_text(*m_run).toHtmlEscaped());
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
  const int tp = tensor_parallel_degree(*m_run);
  for (const RankStepMetrics& r : ranks) {
    const double k = rank_key(r.rank, tp);
    measured_keys << k - 0.18;
    predicted_keys << k + 0.18;
    measured.push_back(r.mem_current);
    predicted.push_back(r.mem_predicted);
    ticks->addTick(k, rank_label(r.rank, tp) + "\nledger | plan");
    top = std::max({top, static_cast<double>(r.mem_current.total()), static_cast<double>(r.mem_predicted.total())});
  }
  stack_bars(p, measured_keys, measured, 255, true);
  stack_bars(p, predicted_keys, predicted, 90, false);
  // Two columns: six categories in one column were taller than the room above the bars in a
  // 1280-wide window's dock, and covered rank 0's bars.
  p->legend->setWrap(2);
  p->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);  // rearranges the items
  p->xAxis->setTicker(ticks);
  p->xAxis->setRange(0.4, rank_key(static_cast<int>(ranks.size()) - 1, tp) + 0.6);
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
  const int tp = tensor_parallel_degree(*m_run);
  for (const RankTimeTotals& r : t.ranks) {
    const double n = std::max<long>(1, r.steps);
    keys << rank_key(r.rank, tp);
    compute << r.compute_ms / n;
    comm << r.comm_ms / n;
    wait << r.wait_ms / n;
    top = std::max(top, r.step_ms / n);
    ticks->addTick(rank_key(r.rank, tp), rank_label(r.rank, tp) + QString("\n%1 sent").arg(format_bytes(r.bytes_sent / n)));
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
  p->xAxis->setRange(0.4, rank_key(static_cast<int>(std::max<size_t>(1, t.ranks.size())) - 1, tp) + 0.6);
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
