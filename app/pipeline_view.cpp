#include "pipeline_view.h"

#include <QDir>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSlider>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "pipeline_chart.h"
#include "util/error.h"

namespace trainlab::app {

namespace {

QString share_text(double f) { return QString::number(100.0 * f, 'f', 1) + " %"; }

QTableWidgetItem* stage_cell(const QString& text) {
  auto* it = new QTableWidgetItem(text);
  it->setFlags(it->flags() & ~Qt::ItemIsEditable);
  it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return it;
}

}  // namespace

PipelineView::PipelineView(QWidget* parent) : QWidget(parent) {
  setWindowTitle("Pipeline");
  auto* v = new QVBoxLayout(this);
  m_header = new QLabel("Open a run over pipeline stages (dist.pp > 1) to see its schedule as it ran.", this);
  m_header->setObjectName("pipeline_header");
  m_header->setWordWrap(true);
  v->addWidget(m_header);
  auto* row = new QHBoxLayout;
  m_step_label = new QLabel(this);
  m_step_label->setMinimumWidth(160);
  m_slider = new QSlider(Qt::Horizontal, this);
  m_slider->setObjectName("pipeline_step");
  m_slider->setEnabled(false);
  m_slider->setToolTip("The recorded steps: the first 8, then every 50th");
  row->addWidget(new QLabel("Step", this));
  row->addWidget(m_slider, 1);
  row->addWidget(m_step_label);
  v->addLayout(row);
  auto* split = new QSplitter(Qt::Vertical, this);
  m_measured = new PipelineChart(split);
  m_measured->setObjectName("pipeline_measured");
  m_ideal = new PipelineChart(split);
  m_ideal->setObjectName("pipeline_ideal");
  m_table = new QTableWidget(0, 7, split);
  m_table->setObjectName("pipeline_stages");
  m_table->setHorizontalHeaderLabels(
      {"stage", "rank", "step ms", "forward ms", "backward ms", "waiting for data ms", "bubble"});
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->verticalHeader()->hide();
  split->addWidget(m_measured);
  split->addWidget(m_ideal);
  split->addWidget(m_table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 1);
  v->addWidget(split, 1);
  m_measured->show_none("No run shown yet.");
  m_ideal->show_none("");
  connect(m_slider, &QSlider::valueChanged, this, &PipelineView::show_step);
}

bool PipelineView::load(const QString& run_dir) {
  std::vector<PipelineStepRecord> records;
  try {
    records = read_pipeline_timeline(QDir(run_dir).absolutePath().toStdString());
  } catch (const Error& e) {
    m_error = QString::fromStdString(e.what());
    return false;
  }
  if (records.empty()) {
    m_error = QString("%1 has no pipeline timeline (pipeline.jsonl): it was not a run over pipeline stages "
                      "(dist.pp > 1).")
                  .arg(QDir::toNativeSeparators(run_dir));
    return false;
  }
  m_error.clear();
  m_dir = run_dir;
  m_records = std::move(records);
  const PipelineStepRecord& r = m_records.front();
  m_header->setText(QString("%1: %2 over %3 stages, %4 micro-batches a step%5. %6 recorded steps.")
                        .arg(QDir::toNativeSeparators(run_dir))
                        .arg(QString::fromStdString(r.schedule))
                        .arg(r.p)
                        .arg(r.m)
                        .arg(r.v > 1 ? QString(", %1 chunks a stage").arg(r.v) : QString())
                        .arg(m_records.size()));
  m_slider->blockSignals(true);
  m_slider->setRange(0, static_cast<int>(m_records.size()) - 1);
  m_slider->setValue(0);
  m_slider->blockSignals(false);
  m_slider->setEnabled(m_records.size() > 1);
  show_step(0);
  return true;
}

void PipelineView::show_step(int index) {
  if (index < 0 || index >= static_cast<int>(m_records.size())) return;
  const PipelineStepRecord& r = m_records[static_cast<size_t>(index)];
  m_step_label->setText(QString("step %1 (%2 of %3)").arg(r.step).arg(index + 1).arg(m_records.size()));
  try {
    const dist::PipelineSchedule kind = dist::pipeline_schedule_from_name(r.schedule, "schedule");
    m_measured->show_measured(r.timing, kind, r.p, r.m, r.v, QString("Step %1").arg(r.step));
    m_ideal->show_schedule(kind, r.p, r.m, r.v);
  } catch (const Error& e) {
    m_measured->show_none(QString::fromStdString(e.what()));
  }
  fill_table(r);
}

void PipelineView::fill_table(const PipelineStepRecord& r) {
  m_table->setRowCount(static_cast<int>(r.stages.size()) + 1);
  int row = 0;
  for (const PipelineStageTimes& s : r.stages) {
    m_table->setItem(row, 0, stage_cell(QString::number(s.stage)));
    m_table->setItem(row, 1, stage_cell(QString::number(s.rank)));
    m_table->setItem(row, 2, stage_cell(QString::number(s.step_ms, 'f', 2)));
    m_table->setItem(row, 3, stage_cell(QString::number(s.forward_ms, 'f', 2)));
    m_table->setItem(row, 4, stage_cell(QString::number(s.backward_ms, 'f', 2)));
    m_table->setItem(row, 5, stage_cell(QString::number(s.recv_wait_ms, 'f', 2)));
    m_table->setItem(row, 6, stage_cell(share_text(s.bubble)));
    ++row;
  }
  m_table->setItem(row, 0, stage_cell("predicted"));
  for (int c = 1; c < 6; ++c) m_table->setItem(row, c, stage_cell(""));
  m_table->setItem(row, 6, stage_cell(QString("%1 (schedule), %2 (formula)")
                                    .arg(share_text(r.simulated_bubble), share_text(r.formula_bubble))));
}

}  // namespace trainlab::app
