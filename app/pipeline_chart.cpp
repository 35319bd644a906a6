#include "pipeline_chart.h"

#include <QLabel>
#include <algorithm>
#include <cmath>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "plot_style.h"
#include "util/error.h"

namespace trainlab::app {

namespace {

QCPTextElement* title_of(QCustomPlot* p) { return qobject_cast<QCPTextElement*>(p->plotLayout()->element(0, 0)); }

QString percent(double f) { return QString::number(100.0 * f, 'f', 1) + " %"; }

const char* kIdealAxis = "time (one forward = 1; a backward 2: input and weight gradient 1 each)";

// A block's colour: its micro-batch's, lighter for a forward, darker for a weight gradient.
QColor block_color(const PipelineChart::Block& b) {
  const QColor c = run_color(b.micro_batch);
  if (b.op == dist::PipeOp::Forward) return c.lighter(150);
  if (b.op == dist::PipeOp::BackwardWeight) return c.darker(140);
  return c;
}

}  // namespace

QString bubble_formula(dist::PipelineSchedule kind, int p, int m, int v) {
  switch (kind) {
    case dist::PipelineSchedule::GPipe:
    case dist::PipelineSchedule::OneFOneB:
      return QString("(p-1)/(m+p-1) = %1").arg(percent(static_cast<double>(p - 1) / (m + p - 1)));
    case dist::PipelineSchedule::Interleaved:
      return QString("(p-1)/(v m+p-1) = %1").arg(percent(static_cast<double>(p - 1) / (v * m + p - 1)));
    case dist::PipelineSchedule::ZbH1: return {};
  }
  return {};
}

PipelineChart::PipelineChart(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(0, 0, 0, 0);
  m_plot = new QCustomPlot(this);
  m_plot->setObjectName("pipeline_chart");
  m_plot->setMinimumHeight(200);
  m_plot->plotLayout()->insertRow(0);
  auto* t = new QCPTextElement(m_plot, "Pipeline schedule", QFont(font().family(), font().pointSize(), QFont::DemiBold));
  m_plot->plotLayout()->addElement(0, 0, t);
  m_plot->xAxis->setLabel(kIdealAxis);
  m_plot->yAxis->setRangeReversed(true);
  style_plot(m_plot, palette());
  m_note = new QLabel(this);
  m_note->setObjectName("pipeline_note");
  m_note->setWordWrap(true);
  v->addWidget(m_plot, 1);
  v->addWidget(m_note);
}

QString PipelineChart::title() const { return title_of(m_plot)->text(); }
QString PipelineChart::note() const { return m_note->text(); }

void PipelineChart::show_none(const QString& why) {
  m_blocks.clear();
  m_timing = {};
  m_plot->clearItems();
  m_plot->clearPlottables();
  title_of(m_plot)->setText("Pipeline schedule");
  m_note->setText(why);
  m_plot->replot();
}

void PipelineChart::show_schedule(dist::PipelineSchedule kind, int p, int m, int v) {
  try {
    dist::validate_pipeline(kind, p, m, v);
    const dist::PipelineTable t = dist::build_schedule(kind, p, m, v);
    m_timing = dist::simulate(t, dist::chunk_costs({}, v));
    m_plot->xAxis->setLabel(kIdealAxis);
    draw(t.stages, t.chunks);
    const QString formula = bubble_formula(kind, p, m, v);
    title_of(m_plot)->setText(QString("%1, %2 stages, %3 micro-batches%4: idle %5%6")
                                  .arg(dist::pipeline_schedule_name(kind))
                                  .arg(p)
                                  .arg(m)
                                  .arg(v > 1 ? QString(", %1 chunks a stage").arg(v) : QString())
                                  .arg(percent(m_timing.idle_fraction))
                                  .arg(formula.isEmpty() ? QString() : " (formula " + formula + ")"));
    QString peaks;
    for (size_t s = 0; s < m_timing.peak_in_flight.size(); ++s)
      peaks += (s ? ", " : "") + QString::number(m_timing.peak_in_flight[s]);
    QString warning = QString::fromStdString(dist::pipeline_warning(kind, p, m, v));
    if (!warning.isEmpty()) warning += " ";
    m_note->setText(warning + QString("Micro-batches whose activations a stage holds at most, stage 0 on: %1.").arg(peaks));
  } catch (const Error& e) {
    show_none(QString::fromUtf8(e.what()));
  }
}

double measured_idle_fraction(const dist::PipelineTiming& t) {
  double first = INFINITY, last = -INFINITY, busy = 0;
  for (const auto& stage : t.stages)
    for (const dist::TimedAction& a : stage) {
      first = std::min(first, a.start);
      last = std::max(last, a.end);
      busy += a.end - a.start;
    }
  const double span = last - first;
  if (t.stages.empty() || !(span > 0)) return 0.0;
  return std::max(0.0, 1.0 - busy / (span * static_cast<double>(t.stages.size())));
}

void PipelineChart::show_measured(const dist::PipelineTiming& measured, dist::PipelineSchedule kind, int p, int m,
                                  int v, const QString& what) {
  if (measured.stages.empty()) {
    show_none("The step has no recorded actions.");
    return;
  }
  m_timing = measured;
  double first = INFINITY;
  for (const auto& stage : m_timing.stages)
    for (const dist::TimedAction& a : stage) first = std::min(first, a.start);
  m_timing.makespan = 0;
  for (auto& stage : m_timing.stages)
    for (dist::TimedAction& a : stage) {
      a.start -= first;
      a.end -= first;
      m_timing.makespan = std::max(m_timing.makespan, a.end);
    }
  m_timing.idle_fraction = measured_idle_fraction(m_timing);
  m_plot->xAxis->setLabel("time in the step (ms)");
  draw(static_cast<int>(m_timing.stages.size()), v);
  QString schedule_idle;
  try {
    const dist::PipelineTiming ideal = dist::simulate(dist::build_schedule(kind, p, m, v), dist::chunk_costs({}, v));
    schedule_idle = QString(", the schedule's %1").arg(percent(ideal.idle_fraction));
  } catch (const Error&) {
  }
  const QString formula = bubble_formula(kind, p, m, v);
  title_of(m_plot)->setText(QString("%1, measured: idle %2%3%4")
                                .arg(what)
                                .arg(percent(m_timing.idle_fraction))
                                .arg(schedule_idle)
                                .arg(formula.isEmpty() ? QString() : ", formula " + formula));
  m_note->setText(QString("Measured %1, %2 stages, %3 micro-batches%4: %5 ms from the first action to the last. "
                          "Blocks are where each stage computed; the shaded gaps are where it waited.")
                      .arg(dist::pipeline_schedule_name(kind))
                      .arg(p)
                      .arg(m)
                      .arg(v > 1 ? QString(", %1 chunks a stage").arg(v) : QString())
                      .arg(m_timing.makespan, 0, 'f', 2));
}

void PipelineChart::draw(int stages, int chunks) {
  m_plot->clearItems();
  m_plot->clearPlottables();
  m_blocks.clear();
  const QColor idle = palette().color(QPalette::Mid);
  QSharedPointer<QCPAxisTickerText> rows(new QCPAxisTickerText);
  for (int s = 0; s < stages; ++s) {
    rows->addTick(s, QString("stage %1").arg(s));
    auto* bg = new QCPItemRect(m_plot);  // the row's idle time shows through between blocks
    bg->topLeft->setCoords(0, s - 0.4);
    bg->bottomRight->setCoords(m_timing.makespan, s + 0.4);
    bg->setPen(Qt::NoPen);
    QColor c = idle;
    c.setAlpha(70);
    bg->setBrush(c);
  }
  for (size_t s = 0; s < m_timing.stages.size(); ++s)
    for (const dist::TimedAction& ta : m_timing.stages[s]) {
      Block b{ta.action.stage, ta.action.micro_batch, ta.action.chunk, ta.action.op, ta.start, ta.end};
      m_blocks.push_back(b);
      auto* r = new QCPItemRect(m_plot);
      r->topLeft->setCoords(b.start, b.stage - 0.4);
      r->bottomRight->setCoords(b.end, b.stage + 0.4);
      r->setBrush(block_color(b));
      r->setPen(QPen(palette().color(QPalette::WindowText), 0.5));
      auto* label = new QCPItemText(m_plot);
      label->position->setCoords((b.start + b.end) / 2, b.stage);
      QString text = QString("%1%2").arg(dist::pipe_op_letter(b.op)).arg(b.micro_batch);
      if (chunks > 1) text += QString(".%1").arg(b.chunk);
      label->setText(text);
      label->setFont(QFont(font().family(), std::max(6, font().pointSize() - 2)));
      label->setColor(b.op == dist::PipeOp::Forward ? Qt::black : Qt::white);
    }
  m_plot->yAxis->setTicker(rows);
  m_plot->yAxis->setRange(-0.6, stages - 0.4);
  m_plot->xAxis->setRange(0, m_timing.makespan > 0 ? m_timing.makespan : 1.0);
  m_plot->replot();
}

}  // namespace trainlab::app
