// PlannerView's actions: the search and its table, the check on this machine (on a thread of its
// own) and its table, and taking a run's config; the fields and the plots are planner_view.cpp.
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QThread>

#include "planner_view.h"
#include "run_series.h"
#include "train/plan_check.h"
#include "util/error.h"

namespace trainlab::app {

struct PlannerView::CheckJob {
  PlanSetup setup;
  Layout layout;
  std::string device;
  QTemporaryDir dir;
  PlanCheck result;
  QString error;
};

void PlannerView::run_search() {
  m_search_table->clear();
  m_search = SearchResult{};
  SearchSpace space;
  space.micro_batches = static_cast<int64_t>(number("--micro-batches"));
  space.recompute_every = static_cast<int64_t>(number("--recompute-every"));
  try {
    m_search = search_layouts(setup(), space);
  } catch (const Error& e) {
    m_check_note->setText("Search: " + QString::fromStdString(e.what()).toHtmlEscaped());
    return;
  }
  const QStringList heads = {"DP", "TP", "PP", "ZeRO", "recompute", "micro-batches", "GB/GPU", "GiB/GPU", "step s",
                             "compute s", "comm s", "bubble s", "tokens/s"};
  m_search_table->setColumnCount(heads.size());
  m_search_table->setHorizontalHeaderLabels(heads);
  m_search_table->setRowCount(static_cast<int>(m_search.fit.size()));
  for (int i = 0; i < static_cast<int>(m_search.fit.size()); ++i) {
    const PlanResult& r = m_search.fit[static_cast<size_t>(i)];
    const Layout& l = r.layout;
    const double bytes = static_cast<double>(r.per_gpu_total);
    const QStringList cells = {QString::number(l.dp), QString::number(l.tp), QString::number(l.pp), QString::number(l.zero),
                               recompute_name(l.recompute), QString::number(l.micro_batches),
                               QString::number(bytes / 1e9, 'f', 2), QString::number(bytes / 1073741824.0, 'f', 2),
                               QString::number(r.time.step_s, 'g', 4), QString::number(r.time.compute_s, 'g', 3),
                               QString::number(r.time.communication_s(), 'g', 3), QString::number(r.time.bubble_s, 'g', 3),
                               QString::number(r.time.tokens_per_s(), 'g', 4)};
    for (int c = 0; c < cells.size(); ++c) m_search_table->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
  m_search_table->resizeColumnsToContents();
  m_check_note->setText(QString("Search: %1 of %2 layouts fit at a global batch of %3, fastest first (click a row to "
                                "apply it).")
                            .arg(m_search.fit.size())
                            .arg(m_search.considered)
                            .arg(m_search.global_batch));
}

void PlannerView::apply_search_row(int row) {
  if (row < 0 || row >= static_cast<int>(m_search.fit.size())) return;
  const Layout& l = m_search.fit[static_cast<size_t>(row)].layout;
  m_loading = true;
  set_field("--tp", static_cast<int>(l.tp));
  set_field("--pp", static_cast<int>(l.pp));
  set_field("--zero", QString::number(l.zero));
  set_field("--recompute", recompute_name(l.recompute));
  set_field("--micro-batches", static_cast<int>(l.micro_batches));
  m_loading = false;
  recompute();
}

void PlannerView::update_check_button() {
  if (checking()) return;
  QString why;
  if (!m_has_result) {
    why = "The check needs a valid plan.";
  } else {
    try {
      why = QString::fromStdString(plan_check_unsupported(m_setup, m_result.layout));
    } catch (const Error& e) {
      why = QString::fromStdString(e.what());
    }
    if (!why.isEmpty()) why = "Check on this machine: " + why + ".";
  }
  m_check->setEnabled(why.isEmpty());
  m_check->setToolTip(why.isEmpty() ? "A short run of the lab's own model with this layout on this machine: the "
                                      "ledger's bytes beside the prediction"
                                    : why);
  if (!why.isEmpty() || m_check_note->property("why").toBool()) {
    m_check_note->setText(why);
    m_check_note->setProperty("why", !why.isEmpty());
  }
}

bool PlannerView::start_check(const QString& device) {
  if (checking()) return false;
  recompute();
  update_check_button();
  if (!m_check->isEnabled()) return false;
  m_job = std::make_shared<CheckJob>();
  m_job->setup = m_setup;
  m_job->layout = m_result.layout;
  m_job->device = device.toStdString();
  std::shared_ptr<CheckJob> job = m_job;
  m_thread = QThread::create([job] {
    try {
      job->result = check_plan(job->setup, job->layout, job->device, job->dir.filePath("run").toStdString(), 1);
    } catch (const std::exception& e) {  // nothing crosses the thread: the error is shown
      job->error = QString::fromStdString(describe_exception(e, "checking the plan"));
    }
  });
  connect(m_thread, &QThread::finished, this, [this] {
    m_thread->deleteLater();
    m_thread = nullptr;
    show_check(m_job->error.isEmpty());
    m_job.reset();
  });
  m_check->setEnabled(false);
  m_check_note->setProperty("why", false);
  m_check_note->setText("Checking: one step of the lab's model on " + device + "...");
  m_thread->start();
  return true;
}

void PlannerView::show_check(bool ok) {
  update_check_button();
  if (!ok) {
    m_check_note->setText("Check failed: " + m_job->error.toHtmlEscaped());
    emit check_finished(false);
    return;
  }
  const PlanCheck& c = m_job->result;
  const QStringList heads = {"category", "predicted", "measured", "measured / predicted"};
  m_check_table->clear();
  m_check_table->setColumnCount(heads.size());
  m_check_table->setHorizontalHeaderLabels(heads);
  const MemCategory rows[] = {MemCategory::Weights, MemCategory::Gradients, MemCategory::Optimizer, MemCategory::Activations};
  m_check_table->setRowCount(5);
  double tp = 0, tm = 0;
  auto put = [&](int row, const QString& name, double p, double m) {
    const QStringList cells = {name, format_bytes(p), format_bytes(m), p > 0 ? QString::number(100.0 * m / p, 'f', 2) + " %" : "-"};
    for (int i = 0; i < cells.size(); ++i) m_check_table->setItem(row, i, new QTableWidgetItem(cells[i]));
  };
  for (int i = 0; i < 4; ++i) {
    const double p = static_cast<double>(c.predicted[static_cast<size_t>(rows[i])]);
    const double m = static_cast<double>(c.measured[static_cast<size_t>(rows[i])]);
    tp += p;
    tm += m;
    put(i, mem_category_name(rows[i]), p, m);
  }
  put(4, "total", tp, tm);
  m_check_table->resizeColumnsToContents();
  QString time = QString("measured step %1 s").arg(c.step_s_measured, 0, 'g', 4);
  if (c.step_s_predicted > 0)
    time += QString(", predicted %1 s at MFU %2 (measured MFU %3)")
                .arg(c.step_s_predicted, 0, 'g', 4)
                .arg(m_job->setup.mfu, 0, 'f', 2)
                .arg(c.mfu_measured, 0, 'f', 3);
  m_check_note->setText(QString("Checked on %1 (%2 step%3, the lab's own count): %4.")
                            .arg(QString::fromStdString(c.device))
                            .arg(c.steps)
                            .arg(c.steps == 1 ? "" : "s")
                            .arg(time));
  emit check_finished(true);
}

void PlannerView::set_from_config(const Config& c) {
  const std::string model = c.get_string("model.name");
  m_loading = true;
  if (model == "digits-mlp") set_field("--model", "digits-mlp");
  if (model == "char-gpt") set_field("--model", QString::fromStdString("char-gpt-" + c.get_string("model.preset")));
  on_model_changed();
  if (model == "char-gpt") {
    for (const auto& [key, option] : {std::pair{"model.layers", "--layers"}, std::pair{"model.dim", "--hidden"},
                                      std::pair{"model.heads", "--heads"}, std::pair{"model.context", "--seq"}})
      if (c.get_int(key) > 0) set_field(option, static_cast<int>(c.get_int(key)));
    set_field("--dropout", c.get_float("model.dropout"));
    const std::string policy = c.get_string("checkpoint.policy");
    set_field("--recompute", policy == "off" ? "none" : policy == "selective" ? "selective" : "full");
    set_field("--recompute-every", policy == "every-k" && c.get_int("checkpoint.k") > 0 ? static_cast<int>(c.get_int("checkpoint.k")) : 1);
  }
  set_field("--precision", QString::fromStdString(c.get_string("precision.dtype")));
  set_field("--optimizer", QString::fromStdString(c.get_string("optim.name")));
  set_field("--offload", QString::fromStdString(c.get_string("optim.offload")));
  set_field("--batch", static_cast<int>(c.get_int("train.batch")));
  set_field("--micro-batches", static_cast<int>(c.get_int("train.accumulate")));
  m_loading = false;
  recompute();
}

}  // namespace trainlab::app
