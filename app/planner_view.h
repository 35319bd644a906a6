// PlannerView: the memory and scale planner (issue 18) in the window, the same library calls as
// `trainlab-cli plan` (plan/planner.h, train/plan_check.h). Left: a field for each option of the
// command (named as the command names it: "--tp", "--model", ...), with sliders beside the
// micro-batch, the GPUs, the micro-batches and the MFU. Right: the bytes per GPU stacked by
// category, one bar per pipeline stage, against the GPU's memory line (QCustomPlot, as the other
// plots); the time per step split into compute, communication (TP, PP, DP) and bubble; the
// search's table (a click on a row applies its layout); and "Check on this machine": a short run
// of the lab's own model with the layout on one device, the ledger's bytes beside the prediction
// (a lab model and DP = TP = PP = 1 only; otherwise the view says why). Below the plots, the
// layout's pipeline schedule drawn stage by stage (app/pipeline_chart.h). Everything is recomputed
// on every edit (a plan takes microseconds); the check runs on a thread of its own.
#pragma once
#include <QMap>
#include <QString>
#include <QVariant>
#include <QWidget>
#include <memory>

#include "config/config.h"
#include "plan/planner.h"

class QCustomPlot;
namespace trainlab::app {
class PipelineChart;
}
class QCPBars;
class QFormLayout;
class QLabel;
class QPushButton;
class QTableWidget;
class QThread;

namespace trainlab::app {

class PlannerView : public QWidget {
  Q_OBJECT
 public:
  explicit PlannerView(QWidget* parent = nullptr);
  ~PlannerView() override;

  // The fields as the planner takes them; throws Error naming the option at fault.
  PlanSetup setup() const;
  Layout layout() const;
  // A field by its option name ("--model", "--tp", "--gpu-memory", ...), and setting one as if the
  // user had (a combo box takes its text, the others a number).
  QWidget* field(const QString& option) const;
  void set_field(const QString& option, const QVariant& value);
  // The model, precision, micro-batch, accumulation and checkpointing of a run's config (a lab
  // model: digits-mlp or a char-gpt preset with its shape).
  void set_from_config(const Config& c);

  bool has_result() const { return m_has_result; }
  const PlanResult& result() const { return m_result; }
  QString error() const { return m_error; }

  // Searches the layouts that fit (the fields given as fixed: none; the global batch stays the
  // current micro-batch x micro-batches x GPUs) and fills the table.
  void run_search();
  const SearchResult& search_result() const { return m_search; }
  // Applies the layout of the search table's row.
  void apply_search_row(int row);

  PipelineChart* pipeline_chart() const { return m_pipeline; }
  // Starts the check on `device`; false (and check_note() says why) when the layout cannot run here.
  bool start_check(const QString& device = "auto");
  bool checking() const { return m_thread != nullptr; }

  QCustomPlot* memory_plot() const { return m_memory; }
  QCustomPlot* time_plot() const { return m_time; }
  QTableWidget* search_table() const { return m_search_table; }
  QTableWidget* check_table() const { return m_check_table; }
  QPushButton* check_button() const { return m_check; }
  QLabel* check_note() const { return m_check_note; }
  QLabel* summary() const { return m_summary; }

 signals:
  void check_finished(bool ok);

 protected:
  void changeEvent(QEvent* e) override;

 private:
  QWidget* build_fields();
  QWidget* build_results();
  void add_field(const QString& option, QWidget* editor, const QString& label, const QString& tip, QWidget* slider = nullptr);
  void on_model_changed();
  void on_gpu_changed();
  void recompute();
  void draw_memory();
  void draw_time();
  void draw_pipeline();
  void update_check_button();
  void show_check(bool ok);
  double number(const QString& option) const;
  QString text(const QString& option) const;

  QMap<QString, QWidget*> m_fields;
  QFormLayout* m_form = nullptr;
  QCustomPlot* m_memory = nullptr;
  QCustomPlot* m_time = nullptr;
  PipelineChart* m_pipeline = nullptr;  // the layout's schedule (PP > 1)
  QTableWidget* m_search_table = nullptr;
  QTableWidget* m_check_table = nullptr;
  QPushButton* m_check = nullptr;
  QLabel* m_summary = nullptr;
  QLabel* m_check_note = nullptr;
  bool m_loading = false;
  bool m_has_result = false;
  PlanResult m_result;
  PlanSetup m_setup;
  SearchResult m_search;
  QString m_error;
  // The check in flight: its thread and what it hands back.
  struct CheckJob;
  QThread* m_thread = nullptr;
  std::shared_ptr<CheckJob> m_job;
};

}  // namespace trainlab::app
