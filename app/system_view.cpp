#include "system_view.h"

#include <QEvent>
#include <algorithm>
#include <QLabel>
#include <QVBoxLayout>
#include <cmath>
#include <qcustomplot.h>

#include "plot_style.h"
#include "run_series.h"
#include "train/run_record.h"
#include "util/error.h"

namespace trainlab::app {

namespace {

double value_or_nan(const std::optional<double>& v) { return v ? *v : std::nan(""); }

bool any_finite(const QVector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

}  // namespace

SystemView::SystemView(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(4, 4, 4, 4);
  m_summary = new QLabel(this);
  m_summary->setObjectName("system_summary");
  m_summary->setWordWrap(true);
  m_plot = new QCustomPlot(this);
  m_plot->setObjectName("system_plot");
  m_plot->setMinimumSize(320, 220);
  m_plot->xAxis->setLabel("step");
  m_plot->yAxis->setLabel("utilisation (%)");
  m_plot->yAxis->setRange(0, 105);
  m_plot->yAxis2->setLabel("W / °C");
  m_plot->yAxis2->setVisible(true);
  m_plot->legend->setVisible(true);
  const struct {
    const char* name;
    QColor color;
    bool right;
  } graphs[] = {{"CPU utilisation", run_color(0), false},
                {"GPU utilisation", run_color(1), false},
                {"GPU power (W)", run_color(3), true},
                {"GPU temperature (°C)", run_color(2), true}};
  for (const auto& g : graphs) {
    QCPGraph* graph = m_plot->addGraph(m_plot->xAxis, g.right ? m_plot->yAxis2 : m_plot->yAxis);
    graph->setName(g.name);
    graph->setPen(QPen(g.color, 1.6, g.right ? Qt::DashLine : Qt::SolidLine));
  }
  style_plot(m_plot, palette());
  v->addWidget(m_summary);
  v->addWidget(m_plot, 1);
  refresh();
}

void SystemView::clear() {
  for (auto* v : {&m_step, &m_cpu, &m_gpu, &m_power, &m_temp}) v->clear();
  m_mem_used = m_mem_total = 0;
  m_note.clear();
}

void SystemView::append(const StepMetrics& m) {
  if (!m.system) return;
  const SystemSample& s = *m.system;
  m_step << static_cast<double>(m.step);
  m_cpu << value_or_nan(s.cpu_util);
  m_gpu << value_or_nan(s.gpu_util);
  m_power << value_or_nan(s.gpu_power_w);
  m_temp << value_or_nan(s.gpu_temp_c);
  if (s.gpu_mem_used_bytes) m_mem_used = *s.gpu_mem_used_bytes;
  if (s.gpu_mem_total_bytes) m_mem_total = *s.gpu_mem_total_bytes;
}

void SystemView::show_run(const QString& dir) {
  clear();
  try {
    for (const StepMetrics& m : load_run(dir.toStdString()).steps) append(m);
  } catch (const Error& e) {
    m_note = QString::fromStdString(e.what());
  }
  refresh();
}

QString SystemView::summary() const {
  if (!m_note.isEmpty()) return m_note;
  if (m_step.isEmpty())
    return "No system metrics for this run: they are sampled once a second while a run trains "
           "(runs recorded before they existed have none).";
  QStringList parts;
  auto last = [](const QVector<double>& v) {
    for (auto it = v.rbegin(); it != v.rend(); ++it)
      if (std::isfinite(*it)) return *it;
    return std::nan("");
  };
  parts << QString("CPU %1 %").arg(last(m_cpu), 0, 'f', 0);
  if (any_finite(m_gpu) || any_finite(m_power)) {
    parts << QString("GPU %1 %").arg(last(m_gpu), 0, 'f', 0);
    if (any_finite(m_power)) parts << QString("%1 W").arg(last(m_power), 0, 'f', 0);
    if (any_finite(m_temp)) parts << QString("%1 °C").arg(last(m_temp), 0, 'f', 0);
    if (m_mem_total > 0) parts << format_bytes(m_mem_used) + " / " + format_bytes(m_mem_total);
  } else {
    parts << "no GPU metrics (a CPU run, or no NVIDIA driver)";
  }
  return QString("%1 samples · last: ").arg(m_step.size()) + parts.join(" · ");
}

void SystemView::refresh() {
  const QVector<double>* series[] = {&m_cpu, &m_gpu, &m_power, &m_temp};
  double right_max = 1;
  for (int i = 0; i < 4; ++i) {
    const bool has = any_finite(*series[i]);
    m_plot->graph(i)->setData(m_step, *series[i], true);
    m_plot->graph(i)->setVisible(has);
    m_plot->legend->item(i)->setVisible(has);
    if (i >= 2 && has)
      for (double x : *series[i])
        if (std::isfinite(x)) right_max = std::max(right_max, x);
  }
  m_plot->yAxis2->setVisible(any_finite(m_power) || any_finite(m_temp));
  m_plot->yAxis2->setRange(0, right_max * 1.1);
  if (!m_step.isEmpty()) m_plot->xAxis->setRange(m_step.front(), std::max(m_step.back(), m_step.front() + 1));
  m_summary->setText(summary());
  m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void SystemView::changeEvent(QEvent* e) {
  if (e->type() == QEvent::PaletteChange) {
    style_plot(m_plot, palette());
    m_plot->replot(QCustomPlot::rpQueuedReplot);
  }
  QWidget::changeEvent(e);
}

}  // namespace trainlab::app
