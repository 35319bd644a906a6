// The main window: controls (left), live plots (centre), runs table (bottom). The trainer runs on
// a worker thread (TrainingSession); metrics arrive through queued signals into the live run's
// RunSeries and the plots redraw from their own timer. Closing the window while a run trains asks,
// then stops the run and waits for its record; a stop signal (quit_for_signal) does so without asking.
#pragma once
#include <QLabel>
#include <QMainWindow>
#include <QMap>
#include <memory>

#include "config_form.h"
#include "kernel_panel.h"
#include "roofline_view.h"
#include "ranks_panel.h"
#include "plot_panel.h"
#include "runs_panel.h"
#include "system_view.h"
#include "text_panel.h"
#include "trainer_worker.h"

class QAction;
class QMenu;
class QComboBox;
class QProgressBar;
class QPushButton;
class QSplitter;
class QFrame;
class QDockWidget;
class QVBoxLayout;

namespace trainlab::app {
class PipelineView;
class SensitivityView;
class SweepView;

// The folders that hold config presets (presets/ under each resource root), without repeats.
QStringList preset_dirs();

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // runs_root: the runs folder to use (empty: QSettings, else ./runs).
  explicit MainWindow(const QString& runs_root = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  ConfigForm* form() const { return m_form; }
  PlotPanel* plots() const { return m_plots; }
  RunsPanel* runs() const { return m_runs; }
  TrainingSession* session() const { return m_session; }
  TextPanel* text_panel() const { return m_text; }
  KernelPanel* kernel_panel() const { return m_kernels; }
  QDockWidget* kernel_dock() const { return m_kernel_dock; }
  RooflineView* roofline_view() const { return m_roofline; }
  QDockWidget* roofline_dock() const { return m_roofline_dock; }
  RanksPanel* ranks_panel() const { return m_ranks; }
  QDockWidget* ranks_dock() const { return m_ranks_dock; }
  SystemView* system_view() const { return m_system; }
  QDockWidget* system_dock() const { return m_system_dock; }
  std::shared_ptr<RunSeries> live_run() const { return m_live; }
  std::shared_ptr<RunSeries> primary_run() const { return m_primary; }
  QPushButton* start_button() const { return m_start; }
  QPushButton* pause_button() const { return m_pause; }
  QPushButton* stop_button() const { return m_stop; }
  bool running() const { return m_session->running(); }

  // The message bar: kind is "error", "warning" or "info".
  void show_message(const QString& kind, const QString& text);
  QString message_text() const;
  QString message_kind() const { return m_message_kind; }

  bool start_run();
  // Continues the stopped or interrupted run in `dir` from its checkpoint, through the same worker
  // as start_run (the runs table's Resume); shows why in the message bar when it cannot.
  bool resume_run(const QString& dir);
  void stop_run();
  // SIGINT, SIGTERM or SIGHUP (StopSignals): ends like the Stop button without asking (the run
  // stops at its next step and its record, "stopped", is written), then quits the app with exit
  // code 128 + signo.
  void quit_for_signal(int signo);
  void toggle_pause();
  // No config remembered from an earlier session: the app's first start (app_cli calls
  // prepare_first_launch then, unless told a config).
  bool first_launch() const { return m_first_launch; }
  // Loads presets/digits-first-run.json (a digits run that lasts tens of seconds on a CPU, so the
  // curves visibly move) and arms a hint, shown in the message bar when that run starts, of one
  // setting to change while it trains.
  void prepare_first_launch();
  static QString first_run_hint();
  bool load_preset(const QString& path);
  bool save_preset(const QString& path);
  void reopen(const QString& dir);
  // Writes a report of run folders (PDF, HTML or CSV by extension); shows errors in the window.
  bool export_report(const QStringList& dirs, const QString& path);
  void about();
  QString about_text() const;  // versions of TrainLab, Qt, CUDA, the compiler, and the devices
  // The Layer sensitivity window (View menu), made on first use with the shown run's weights.
  SensitivityView* show_sensitivity_view();
  // The Pipeline schedule window (View menu) with the shown run's measured timeline; a message box
  // says why when the shown run has none.
  PipelineView* show_pipeline_view();
  // The Compression sweep window (View menu), made on first use and not yet shown.
  SweepView* sweep_view();

 protected:
  void closeEvent(QCloseEvent* e) override;
  void changeEvent(QEvent* e) override;  // a palette change restyles the message bar

 private:
  // The message bar's colours for its kind, from the window's palette (light or dark).
  void style_message_bar();
  void build_ui();
  QWidget* build_controls();
  void build_run_buttons(QWidget* left, QVBoxLayout* lv);
  void build_preset_row(QWidget* left, QVBoxLayout* lv);
  QWidget* build_centre();
  void build_docks();
  void build_menus();
  void add_view_windows(QMenu* view);
  void on_metrics();
  void on_finished(const QString& status, const QString& message, const QString& dir);
  void end_session();
  void update_overlays(const QStringList& dirs);
  void update_plots();
  void show_ranks();
  void update_buttons();
  void export_dialog(const QStringList& dirs);
  void fill_presets();
  std::shared_ptr<RunSeries> load_cached(const QString& dir);
  void restore_settings();
  void save_settings();
  std::string key_in_message(const QString& msg) const;

  ConfigForm* m_form = nullptr;
  PlotPanel* m_plots = nullptr;
  RunsPanel* m_runs = nullptr;
  TrainingSession* m_session = nullptr;
  TextPanel* m_text = nullptr;
  QDockWidget* m_text_dock = nullptr;
  KernelPanel* m_kernels = nullptr;
  QDockWidget* m_kernel_dock = nullptr;
  RooflineView* m_roofline = nullptr;
  QDockWidget* m_roofline_dock = nullptr;
  RanksPanel* m_ranks = nullptr;
  QDockWidget* m_ranks_dock = nullptr;
  QString m_ranks_opened_for;  // the run (live or reopened) whose ranks dock was opened by itself
  SystemView* m_system = nullptr;  // View > System metrics: the shown run's CPU / GPU utilisation
  QDockWidget* m_system_dock = nullptr;
  QPushButton *m_start = nullptr, *m_pause = nullptr, *m_stop = nullptr;
  QComboBox* m_presets = nullptr;
  QProgressBar* m_progress = nullptr;
  QLabel* m_status = nullptr;
  QFrame* m_message = nullptr;
  QLabel* m_message_label = nullptr;
  QString m_message_kind;
  QStringList m_run_notices;  // the notices since the current run started (shown together)
  QSplitter *m_hsplit = nullptr, *m_vsplit = nullptr;
  std::shared_ptr<RunSeries> m_live, m_primary;
  QStringList m_overlay_dirs;
  QMap<QString, std::shared_ptr<RunSeries>> m_cache;
  QString m_last_export_dir;
  QAction* m_dark_action = nullptr;  // View > Dark palette
  bool m_first_launch = false, m_first_run_hint = false;
};

}  // namespace trainlab::app
