#include "kernel_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QStackedLayout>
#include <QTableWidget>
#include <QVBoxLayout>

namespace trainlab::app {

namespace {

QTableWidgetItem* number_item(double v, int decimals) {
  auto* it = new QTableWidgetItem(QLocale::system().toString(v, 'f', decimals));
  it->setData(Qt::UserRole, v);
  it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return it;
}

}  // namespace

KernelPanel::KernelPanel(QWidget* parent) : QWidget(parent) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(6, 6, 6, 6);
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  v->addWidget(m_summary);
  auto* holder = new QWidget(this);
  m_stack = new QStackedLayout(holder);
  m_empty = new QLabel(holder);
  m_empty->setObjectName("kernel_message");
  m_empty->setWordWrap(true);
  m_empty->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  m_table = new QTableWidget(0, 5, holder);
  m_table->setObjectName("kernel_table");
  m_table->setHorizontalHeaderLabels({"Kernel", "Total ms", "Calls", "ms / call", "Share of kernel time"});
  m_table->verticalHeader()->setVisible(false);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  m_table->horizontalHeader()->setSectionResizeMode(4, QHeaderView::Stretch);
  m_table->setToolTip("Time of each kernel summed over the run's timed steps (CUDA events around every launch on a GPU, the host clock around each operation on the CPU), "
                      "longest first. Timing serialises the launches, so the step is slower while it is on.");
  m_stack->addWidget(m_empty);
  m_stack->addWidget(m_table);
  v->addWidget(holder, 1);
  refresh();
}

void KernelPanel::set_run(std::shared_ptr<RunSeries> run) {
  m_run = std::move(run);
  m_shown_steps = -1;
  refresh();
}

QString KernelPanel::message() const { return m_stack->currentWidget() == m_empty ? m_empty->text() : QString(); }
bool KernelPanel::showing_table() const { return m_stack->currentWidget() == m_table; }

void KernelPanel::refresh() {
  if (!m_run || m_run->kernels.isEmpty()) {
    QString why;
    if (!m_run) {
      why = "No run selected. Start a run or reopen one from the runs table.";
    } else {
      const Json flat = flatten_config(m_run->config);
      const bool timing = flat.value("device.kernel_timing", false);
      if (!timing)
        why = "No per-kernel times for " + m_run->name +
              ": kernel timing was off. Turn on Device → Kernel timing (device.kernel_timing) before starting a run.";
      else
        why = "No per-kernel times for " + m_run->name + " yet: they arrive with the first timed step.";
    }
    m_summary->clear();
    m_summary->setVisible(false);
    m_empty->setText(why);
    m_stack->setCurrentWidget(m_empty);
    m_table->setRowCount(0);
    return;
  }
  if (m_shown_steps == m_run->kernel_steps) return;
  m_shown_steps = m_run->kernel_steps;
  const auto ks = m_run->kernels_by_time();
  double total = 0;
  for (const auto& k : ks) total += k.ms;
  m_summary->setVisible(true);
  m_summary->setText(QString("<b>%1</b>: %2 kernels, %3 ms of kernel time over %4 timed steps (%5 ms a step).")
                         .arg(m_run->name.toHtmlEscaped())
                         .arg(ks.size())
                         .arg(QLocale::system().toString(total, 'f', 1))
                         .arg(m_run->kernel_steps)
                         .arg(QLocale::system().toString(total / std::max(1, m_run->kernel_steps), 'f', 3)));
  m_table->setSortingEnabled(false);
  m_table->setRowCount(ks.size());
  for (int i = 0; i < ks.size(); ++i) {
    const double share = total > 0 ? 100.0 * ks[i].ms / total : 0.0;
    m_table->setItem(i, 0, new QTableWidgetItem(ks[i].name));
    m_table->setItem(i, 1, number_item(ks[i].ms, 3));
    m_table->setItem(i, 2, number_item(static_cast<double>(ks[i].calls), 0));
    m_table->setItem(i, 3, number_item(ks[i].calls ? ks[i].ms / static_cast<double>(ks[i].calls) : 0.0, 4));
    auto* bar = qobject_cast<QProgressBar*>(m_table->cellWidget(i, 4));
    if (!bar) {
      bar = new QProgressBar(m_table);
      bar->setRange(0, 1000);
      bar->setTextVisible(true);
      m_table->setCellWidget(i, 4, bar);
    }
    bar->setValue(qRound(share * 10));
    bar->setFormat(QString::number(share, 'f', 1) + " %");
  }
  m_stack->setCurrentWidget(m_table);
}

}  // namespace trainlab::app
